// Small progressive enhancements; every page works without this file.
document.addEventListener("htmx:responseError", (event) => {
  const box = document.getElementById("messages");
  if (!box) return;
  const div = document.createElement("div");
  div.className = "msg msg-error";
  div.textContent = `Request failed (${event.detail.xhr.status}). ${event.detail.xhr.status === 403 ? "Your role may not do this." : "Please try again."}`;
  box.appendChild(div);
});

// <form data-confirm="Delete …?">: ask before sending. The Content-Security-Policy forbids inline
// handlers (onsubmit="…"), so the question lives in the attribute and this listener asks it.
document.addEventListener("submit", (event) => {
  const question = event.target.dataset?.confirm;
  if (question && !window.confirm(question)) event.preventDefault();
});

// A file over the upload limit is refused before it is sent: nobody should wait minutes for
// a 2 GB upload only to read "too big". The server keeps its own check (readers.check_size).
function humanSize(size) {
  let value = size;
  for (const unit of ["bytes", "KB", "MB", "GB"]) {
    if (value < 1024 || unit === "GB") {
      return unit === "bytes" ? `${Math.trunc(value)} bytes` : `${value.toFixed(1)} ${unit}`;
    }
    value /= 1024;
  }
  return `${size} bytes`;
}

document.addEventListener("change", (event) => {
  const input = event.target;
  if (!(input instanceof HTMLInputElement) || !input.dataset.maxBytes) return;
  const limit = Number(input.dataset.maxBytes);
  const tooBig = [...(input.files || [])].find((file) => file.size > limit);
  const message = tooBig
    ? `${tooBig.name}: The file is ${humanSize(tooBig.size)}; the limit is ${humanSize(limit)}. ` +
      "Split it into smaller files, or ask an admin to raise DATASET_MAX_UPLOAD_BYTES."
    : "";
  input.setCustomValidity(message);
  let note = document.getElementById(`${input.id}-size-error`);
  if (!note) {
    note = document.createElement("p");
    note.id = `${input.id}-size-error`;
    note.className = "error";
    note.setAttribute("role", "alert");
    input.insertAdjacentElement("afterend", note);
  }
  note.textContent = message;
  note.hidden = !message;
});

// Wide tables scroll sideways inside .table-wrap: mark the side that hides columns, so the
// cut is visible (a faded edge, see evalsite.css) instead of columns silently missing.
function markScroll(wrap) {
  const hidden = wrap.scrollWidth - wrap.clientWidth;
  wrap.classList.toggle("more-right", hidden > 1 && wrap.scrollLeft < hidden - 1);
  wrap.classList.toggle("more-left", hidden > 1 && wrap.scrollLeft > 1);
}
function markAllScrolls() {
  document.querySelectorAll(".table-wrap").forEach(markScroll);
}
document.addEventListener("DOMContentLoaded", markAllScrolls);
document.addEventListener("htmx:afterSettle", markAllScrolls);
window.addEventListener("resize", markAllScrolls);
document.addEventListener(
  "scroll",
  (event) => {
    if (event.target instanceof Element && event.target.classList.contains("table-wrap")) {
      markScroll(event.target);
    }
  },
  true,
);
