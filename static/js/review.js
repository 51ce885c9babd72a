// Keyboard review: j/k next/previous item, ↓/↑ subject, digits set a value (as the subject's
// scale says: the server puts the map on each card), Enter saves, c confirms, ? shows the keys. Plain DOM, no framework; every action is also a button.
// Never builds HTML from page data: only toggles classes and submits the server's own forms.
(() => {
  "use strict";

  // The review list: tick every item on the page at once.
  document.addEventListener("change", (event) => {
    const box = event.target;
    if (!(box instanceof HTMLInputElement) || !box.matches("[data-tick-all]")) return;
    for (const item of document.querySelectorAll("input[name=item]")) item.checked = box.checked;
  });

  // The review list: j starts the queue as set up in its form.
  const start = document.getElementById("queue-start-form");
  if (start instanceof HTMLFormElement) {
    document.addEventListener("keydown", (event) => {
      if (event.ctrlKey || event.metaKey || event.altKey || isTyping(event.target)) return;
      if (event.key === "j") {
        event.preventDefault();
        start.requestSubmit();
      }
    });
  }

  const page = document.getElementById("review-item");
  if (!page) return;

  let focused = 0;
  const subjects = () => Array.from(document.querySelectorAll("[data-review-subject]"));

  function focusSubject(index, scroll = true) {
    const all = subjects();
    if (!all.length) return;
    focused = Math.max(0, Math.min(index, all.length - 1));
    all.forEach((card, i) => {
      card.classList.toggle("is-focused", i === focused);
      card.setAttribute("aria-current", i === focused ? "true" : "false");
    });
    if (scroll) all[focused].scrollIntoView({ block: "nearest" });
    // The help shows what the digits do on the focused subject only: scales differ.
    for (const block of document.querySelectorAll("[data-keys-for]")) {
      block.hidden = block.getAttribute("data-keys-for") !== all[focused].id;
    }
  }

  const current = () => subjects()[focused] || null;

  function isTyping(element) {
    if (!(element instanceof HTMLElement)) return false;
    if (element.isContentEditable) return true;
    if (element instanceof HTMLTextAreaElement || element instanceof HTMLSelectElement) return true;
    if (!(element instanceof HTMLInputElement)) return false;
    return !["checkbox", "radio", "button", "submit", "reset"].includes(element.type);
  }

  function submit(form) {
    if (form instanceof HTMLFormElement) form.requestSubmit();
  }

  function go(id) {
    const target = document.getElementById(id);
    if (target instanceof HTMLFormElement) submit(target);
    else if (target instanceof HTMLAnchorElement) window.location.assign(target.href);
  }

  function toggleHelp(show) {
    const help = document.getElementById("keys-help");
    if (help) help.hidden = show === undefined ? !help.hidden : !show;
  }

  // What a digit key sets on this card, or null: on a 0/100 subject "1" means 100, never 1,
  // and on a wide range (0–100 continuous) digits set nothing; the value is typed instead.
  function digitValue(card, digit) {
    let keys;
    try {
      keys = JSON.parse(card.getAttribute("data-digit-keys") || "{}");
    } catch {
      return null;
    }
    return Object.prototype.hasOwnProperty.call(keys, digit) ? String(keys[digit]) : null;
  }

  function setDigit(digit) {
    const card = current();
    const input = card && card.querySelector("[data-score-input]");
    if (!(input instanceof HTMLInputElement)) return false;
    const value = digitValue(card, digit);
    if (value === null) return false;
    input.value = value;
    // An override needs a reason: go straight to it. A blind value needs none.
    const reason = card.querySelector("[data-reason-input]");
    (reason instanceof HTMLElement ? reason : input).focus();
    return true;
  }

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || event.isComposing) return;
    const typing = isTyping(event.target);

    if (event.key === "Enter") {
      if (event.shiftKey) return; // a new line in a reason
      if (typing) {
        const form = event.target.form;
        if (form && form.hasAttribute("data-save")) {
          event.preventDefault();
          submit(form);
        }
        return;
      }
      if (event.target instanceof HTMLButtonElement || event.target instanceof HTMLAnchorElement) return;
      // A long field's fold toggle (a checkbox) is not the focused subject's save.
      if (event.target instanceof HTMLInputElement && event.target.type === "checkbox") return;
      const card = current();
      const form = card && card.querySelector("form[data-save]");
      if (form) {
        event.preventDefault();
        submit(form);
      }
      return;
    }

    if (typing) {
      if (event.key === "Escape") event.target.blur();
      return;
    }

    if (/^[0-9]$/.test(event.key)) {
      if (setDigit(event.key)) event.preventDefault();
      return;
    }
    switch (event.key) {
      case "j":
        event.preventDefault();
        go("queue-next");
        break;
      case "k":
        event.preventDefault();
        go("queue-prev");
        break;
      case "c": {
        const card = current();
        const form = card && card.querySelector("form.confirm-form");
        if (form) {
          event.preventDefault();
          submit(form);
        }
        break;
      }
      case "ArrowDown":
        event.preventDefault();
        focusSubject(focused + 1);
        break;
      case "ArrowUp":
        event.preventDefault();
        focusSubject(focused - 1);
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

  // Clicking or tabbing into a subject makes it the focused one.
  document.addEventListener("focusin", (event) => {
    const card = event.target instanceof Element && event.target.closest("[data-review-subject]");
    if (card) focusSubject(subjects().indexOf(card), false);
  });
  document.addEventListener("click", (event) => {
    const card = event.target instanceof Element && event.target.closest("[data-review-subject]");
    if (card) focusSubject(subjects().indexOf(card), false);
    if (event.target instanceof Element && event.target.closest("#keys-toggle")) toggleHelp();
  });

  // After a save the card is replaced: keep the focus mark, and move on to the next subject.
  document.body.addEventListener("htmx:afterSwap", (event) => {
    const card = event.detail && event.detail.target;
    if (!(card instanceof Element)) return;
    const fresh = document.getElementById(card.id) || card;
    if (!fresh.matches || !fresh.matches("[data-review-subject]")) return;
    const index = subjects().indexOf(fresh);
    // A blind value reveals the judge: stay, so the reviewer can confirm (c) or override.
    if (fresh.dataset.saved && fresh.dataset.saved !== "blind") {
      focusSubject(index + 1);
    } else {
      focusSubject(index);
    }
  });

  focusSubject(0, false);
})();
