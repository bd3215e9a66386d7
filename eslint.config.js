// ESLint 9 for the browser's code (tfplace_widget/_static/) and its node tests (tests/js/):
// `./dev lint` runs `npx --yes eslint@9 tfplace_widget/_static tests/js` when node is installed.
// CommonJS, and no imports: npx's eslint cannot import packages (@eslint/js, globals) from this
// folder, which has no node_modules, so @eslint/js 9's "recommended" rules are written out.
const recommended = Object.fromEntries(
  `constructor-super for-direction getter-return no-async-promise-executor no-case-declarations
  no-class-assign no-compare-neg-zero no-cond-assign no-const-assign no-constant-binary-expression
  no-constant-condition no-control-regex no-debugger no-delete-var no-dupe-args
  no-dupe-class-members no-dupe-else-if no-dupe-keys no-duplicate-case no-empty
  no-empty-character-class no-empty-pattern no-empty-static-block no-ex-assign
  no-extra-boolean-cast no-fallthrough no-func-assign no-global-assign no-import-assign
  no-invalid-regexp no-irregular-whitespace no-loss-of-precision no-misleading-character-class
  no-new-native-nonconstructor no-nonoctal-decimal-escape no-obj-calls no-octal
  no-prototype-builtins no-redeclare no-regex-spaces no-self-assign no-setter-return
  no-shadow-restricted-names no-sparse-arrays no-this-before-super no-undef
  no-unexpected-multiline no-unreachable no-unsafe-finally no-unsafe-negation
  no-unsafe-optional-chaining no-unused-labels no-unused-private-class-members no-unused-vars
  no-useless-backreference no-useless-catch no-useless-escape no-with require-yield use-isnan
  valid-typeof`
    .split(/\s+/)
    .map((rule) => [rule, "error"]),
);

const readonly = (names) => Object.fromEntries(names.split(/\s+/).map((name) => [name, "readonly"]));
const BROWSER = readonly(`document console setTimeout clearTimeout requestAnimationFrame
  cancelAnimationFrame performance ResizeObserver Blob URL Response DecompressionStream atob
  CSS getComputedStyle queueMicrotask`);

module.exports = [
  {
    files: ["tfplace_widget/_static/**/*.js"],
    languageOptions: { ecmaVersion: 2022, sourceType: "module", globals: BROWSER },
    rules: recommended,
  },
  {
    // The plotly.js holder and the timeline: bundle_entry.js comes first in both, and
    // bundle_holder._js fills the $NAME placeholders with JSON before the code is sent.
    files: ["tfplace_widget/_static/{bundle_entry,holder,timeline}.js"],
    languageOptions: { globals: readonly("bundleEntry $REGISTRY $DIGEST $WAIT_MS") },
  },
  {
    files: ["tfplace_widget/_static/bundle_entry.js"],
    rules: { "no-unused-vars": ["error", { varsIgnorePattern: "^bundleEntry$" }] },
  },
  {
    // The HTML report's script: search.js and format.js, table.js (without its last line, the
    // export), then report.js, in one async function of a classic <script> (report.js awaits
    // at its top level); plotly.js comes after it.
    files: ["tfplace_widget/_static/{search,format}.js"],
    languageOptions: { sourceType: "script" },
    rules: { "no-unused-vars": ["error", { vars: "local" }] },  // what report.js calls
  },
  {
    files: ["tfplace_widget/_static/report.js"],
    languageOptions: { globals: readonly("matchNames SearchError formatUs renderOpTable Plotly") },
  },
  {
    files: ["tests/js/**/*.mjs"],
    languageOptions: { ecmaVersion: 2022, sourceType: "module", globals: readonly("URL console") },
    rules: recommended,
  },
];
