function bundleEntry(digest) {
  const bundles = (globalThis[$REGISTRY] ??= new Map());
  let entry = bundles.get(digest);
  if (entry === undefined) {
    let resolve, reject;
    const promise = new Promise((res, rej) => { resolve = res; reject = rej; });
    promise.catch(() => {});  // a failed load is reported by the timelines that wait on it
    entry = { promise, resolve, reject, loading: false };
    bundles.set(digest, entry);
  }
  return entry;
}
