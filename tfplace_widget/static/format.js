// Python's format(x, ".0f") rounds an exact half to even; toFixed rounds it up.
function fixed0(x) {
  const floor = Math.floor(x);
  if (x - floor === 0.5) return String(floor % 2 === 0 ? floor : floor + 1);
  return x.toFixed(0);
}

// summary.format_us: 850 µs, 12.3 ms, 1.25 s.
function formatUs(us) {
  if (us !== us) return "";
  if (us < 1000) return `${fixed0(us)} \u00b5s`;
  if (us < 1000000) return `${(us / 1000).toFixed(1)} ms`;
  return `${(us / 1000000).toFixed(2)} s`;
}
