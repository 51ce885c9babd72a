// Small progressive enhancements; every page works without this file.
document.addEventListener("htmx:responseError", (event) => {
  const box = document.getElementById("messages");
  if (!box) return;
  const div = document.createElement("div");
  div.className = "msg msg-error";
  div.textContent = `Request failed (${event.detail.xhr.status}). ${event.detail.xhr.status === 403 ? "Your role may not do this." : "Please try again."}`;
  box.appendChild(div);
});
