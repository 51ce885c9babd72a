// Keyboard review of a generated draft: j/k next/previous item, a approve, r reject, e edit
// (Ctrl+Enter saves, Esc leaves the text), u undo, ? shows the keys. Every action is also a
// button (and works without this file); this only focuses items and submits the server's forms.
(() => {
  "use strict";
  const page = document.getElementById("draft-review");
  if (!page) return;

  let focused = 0;
  const items = () => Array.from(document.querySelectorAll("[data-draft-item]"));

  function focusItem(index, scroll = true) {
    const all = items();
    if (!all.length) return;
    focused = Math.max(0, Math.min(index, all.length - 1));
    all.forEach((card, i) => {
      card.classList.toggle("is-focused", i === focused);
      card.setAttribute("aria-current", i === focused ? "true" : "false");
    });
    if (scroll) all[focused].scrollIntoView({ block: "nearest" });
  }

  function isTyping(element) {
    if (!(element instanceof HTMLElement)) return false;
    if (element.isContentEditable) return true;
    if (element instanceof HTMLTextAreaElement || element instanceof HTMLSelectElement) return true;
    return element instanceof HTMLInputElement && !["checkbox", "radio", "button", "submit"].includes(element.type);
  }

  function press(action) {
    const card = items()[focused];
    const button = card && card.querySelector(`[data-action="${action}"]`);
    if (!button) return false;
    if (action === "edit") {
      const details = button.closest("details");
      if (details) details.open = true;
      const area = card.querySelector("textarea[name=question]");
      if (area instanceof HTMLTextAreaElement) area.focus();
      return true;
    }
    const form = button.closest("form");
    if (form instanceof HTMLFormElement) form.requestSubmit(button);
    return true;
  }

  function toggleHelp(show) {
    const help = document.getElementById("keys-help");
    if (help) help.hidden = show === undefined ? !help.hidden : !show;
  }

  document.addEventListener("keydown", (event) => {
    if (event.metaKey || event.altKey || event.isComposing) return;
    if (isTyping(event.target)) {
      const form = event.target.form;
      if (event.key === "Enter" && event.ctrlKey && form && form.hasAttribute("data-save")) {
        event.preventDefault();
        form.requestSubmit();
      } else if (event.key === "Escape") {
        event.target.blur();
      }
      return;
    }
    if (event.ctrlKey) return;
    const keys = { a: "approve", r: "reject", e: "edit", u: "undo" };
    if (keys[event.key]) {
      if (press(keys[event.key])) event.preventDefault();
      return;
    }
    switch (event.key) {
      case "j":
        event.preventDefault();
        focusItem(focused + 1);
        break;
      case "k":
        event.preventDefault();
        focusItem(focused - 1);
        break;
      case "?":
        event.preventDefault();
        toggleHelp();
        break;
      case "Escape":
        toggleHelp(false);
        break;
    }
  });

  document.addEventListener("click", (event) => {
    if (!(event.target instanceof Element)) return;
    const card = event.target.closest("[data-draft-item]");
    if (card) focusItem(items().indexOf(card), false);
    if (event.target.closest("#keys-toggle")) toggleHelp();
  });

  // A decided item is replaced in place: move on to the next one (an undo stays put).
  document.body.addEventListener("htmx:afterSwap", (event) => {
    const target = event.detail && event.detail.target;
    if (!(target instanceof Element)) return;
    if (target.id === "draft-items") {
      focusItem(0, false);
      return;
    }
    const fresh = document.getElementById(target.id);
    if (!fresh || !fresh.matches("[data-draft-item]")) return;
    const index = items().indexOf(fresh);
    const decided = fresh.querySelector("[data-decision]");
    const stay = fresh.querySelector(".msg-error") || (decided && decided.dataset.decision === "pending");
    focusItem(stay ? index : index + 1);
  });

  focusItem(0, false);
})();
