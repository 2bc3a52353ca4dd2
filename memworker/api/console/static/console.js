// The memworker console's only script: a filter select or checkbox submits its form when it
// changes. Everything works without it (each form has its button).
"use strict";
document.addEventListener("change", (event) => {
  const el = event.target;
  if (el instanceof HTMLElement && el.hasAttribute("data-autosubmit") && el.form) {
    el.form.requestSubmit();
  }
});
