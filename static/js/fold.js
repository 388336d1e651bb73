// A long message of the user's (chat/templatetags/message_tags.py: many lines or many
// characters) is folded to its first lines: "Show more" unfolds it, "Show less" folds it
// again. A button with aria-expanded, so Enter, Space and screen readers work as usual.
(function () {
  "use strict";

  document.addEventListener("click", function (event) {
    var toggle = event.target.closest && event.target.closest("[data-fold-toggle]");
    if (!toggle) return;
    var bubble = toggle.closest("[data-fold]");
    if (!bubble) return;
    var folded = bubble.classList.toggle("folded");
    toggle.setAttribute("aria-expanded", folded ? "false" : "true");
    toggle.textContent = folded ? "Show more" : "Show less";
    // Folding again brings the message's start back into view, not the run below it.
    if (folded) bubble.scrollIntoView({block: "nearest"});
  });
})();
