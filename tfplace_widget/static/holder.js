// The holder has no view: its initialize starts the import (bundleEntry's load, shared with the
// timelines) and returns at once; a frame that has (or is importing) this bundle skips it.
export default {
  initialize({ model }) {
    bundleEntry(model.get("digest")).load(model.get("bundle_gz"));
  },
};
