// The queue is replaced whole when it changes (templates/chat/_queue.html, sent to every
// tab), so a Remove or "Stop and send now" holding the keyboard focus leaves with it and
// the focus falls to <body>. It goes to the same control of the same message if it is
// still queued (another message left), else of the message that took its place (the
// next, else the one before), else to the composer.
(function () {
  "use strict";

  var kept = null;  // {id, form, index} of the focused control, until the swap is done

  document.addEventListener("htmx:oobBeforeSwap", function (event) {
    var target = event.detail && event.detail.target;
    if (!target || target.id !== "queued-messages") return;
    var active = document.activeElement;
    var item = target.contains(active) ? active.closest(".queued-message") : null;
    var form = item ? active.closest("form") : null;
    kept = item && form ? {
      id: item.id,
      form: form.classList[0],
      index: Array.prototype.indexOf.call(target.querySelectorAll(".queued-message"), item),
    } : null;
  });

  document.addEventListener("htmx:oobAfterSwap", function (event) {
    if (!kept || !event.target || event.target.id !== "queued-messages") return;
    var was = kept;
    kept = null;
    var active = document.activeElement;
    if (active && active !== document.body) return;  // it went somewhere meanwhile
    var items = event.target.querySelectorAll(".queued-message");
    var item = document.getElementById(was.id) || items[Math.min(was.index, items.length - 1)];
    var control = item && item.querySelector("." + was.form + " button");
    var composer = document.getElementById("composer-input");
    if (control) control.focus();
    else if (composer) composer.focus();
  });
})();
