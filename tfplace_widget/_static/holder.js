// The holder has no view: its initialize offers the bundle to this frame's registry entry (which
// imports it when a timeline wants it or a few quiet seconds later, see bundleEntry) and returns
// at once; a frame that has (or is importing) this bundle ignores the offer.
export default {
  initialize({ model }) {
    const entry = bundleEntry(model.get("digest"));
    if (entry.offer(model.get("bundle_gz"))) entry.preload?.();  // an older entry has none
  },
};
