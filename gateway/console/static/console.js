// The console's own script (served from /console/static, as the CSP requires).
// Polling (hx-trigger="every 10s") pauses while the tab is hidden: htmx's trigger filters
// ([document.visibilityState=='visible']) are evaluated with eval, which the CSP refuses,
// so the pause is made here instead. Requests are only ever cancelled, never added.
document.addEventListener("htmx:beforeRequest", function (event) {
  if (document.visibilityState !== "visible") {
    event.preventDefault();
  }
});
