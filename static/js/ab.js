// The A/B queue by keyboard: 1 left, 2 right, 3 tie, j the next pair. Keys typed into the
// reason are text, not shortcuts.
(function () {
  "use strict";
  var keys = { "1": "ab-choose-left", "2": "ab-choose-right", "3": "ab-choose-tie", "j": "ab-next" };
  document.addEventListener("keydown", function (event) {
    var target = event.target;
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (target && (target.tagName === "TEXTAREA" || target.tagName === "INPUT")) return;
    var id = keys[event.key];
    var button = id && document.getElementById(id);
    if (button) {
      event.preventDefault();
      button.click();
    }
  });
})();
