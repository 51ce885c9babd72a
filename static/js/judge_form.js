// The judge form shows only the settings of the chosen kind. Without this script every
// group is shown, each with a legend naming its kinds, and the server ignores the settings of
// other kinds (JudgeForm.clean), so the form works the same.
function showKindFields(form) {
  const kind = form.querySelector("select[name=kind]");
  if (!kind) return;
  const update = () => {
    for (const group of form.querySelectorAll("fieldset.kind-fields")) {
      const kinds = group.dataset.kinds.split(" ");
      // Hidden, not disabled: the settings are still sent, and clean() ignores them.
      group.hidden = kind.value !== "" && !kinds.includes(kind.value);
    }
  };
  kind.addEventListener("change", update);
  update();
}

document.addEventListener("DOMContentLoaded", () => {
  const form = document.getElementById("judge-form");
  if (form) showKindFields(form);
});
