// Python's format(x, f".{digits}f") for x >= 0: the nearest, and an exact tie (1.25 to one
// digit) to the even last digit, where toFixed takes the larger. toFixed(100) is every digit
// of a double of these sizes, which tells a tie from a value just above or below one.
function fixed(x, digits) {
  const exact = x.toFixed(100);
  const cut = exact.indexOf(".") + 1 + digits;
  if (!/^50*$/.test(exact.slice(cut))) return x.toFixed(digits);
  const down = exact.slice(0, digits ? cut : cut - 1);
  return Number(down[down.length - 1]) % 2 === 0 ? down : x.toFixed(digits);
}

// summary.format_us: 850 µs, 12.3 ms, 1.25 s (the cases both answer: tests/format_cases.json).
function formatUs(us) {
  if (us !== us) return "";
  if (us < 1000) return `${fixed(us, 0)} \u00b5s`;
  if (us < 1000000) return `${fixed(us / 1000, 1)} ms`;
  return `${fixed(us / 1000000, 2)} s`;
}
