// Times on the page in the reader's terms: a held call's expiry as "in 4 min" (kept
// current), with the exact local time in its title; a decision's time in local time.
// The server renders the same words (chat/templatetags/approval_tags.py) for a page
// without scripts; these take over from there.
(function () {
  "use strict";

  function untilWords(seconds) {
    if (seconds <= 0) return "now";
    if (seconds < 60) return "in less than a minute";
    var minutes = Math.floor(seconds / 60);
    if (minutes < 60) return "in " + minutes + " min";
    var hours = Math.floor(minutes / 60);
    minutes = minutes % 60;
    return "in " + hours + " h" + (minutes ? " " + minutes + " min" : "");
  }

  function localWords(date, withSeconds) {
    var time = date.toLocaleTimeString([], {
      hour: "2-digit", minute: "2-digit", second: withSeconds ? "2-digit" : undefined
    });
    if (date.toDateString() === new Date().toDateString()) return time;
    return date.toLocaleDateString([], { month: "short", day: "numeric" }) + ", " + time;
  }

  function refresh(root) {
    (root || document).querySelectorAll("time[data-until]").forEach(function (el) {
      var at = new Date(el.getAttribute("datetime"));
      if (isNaN(at)) return;
      var words = untilWords((at - Date.now()) / 1000);
      if (el.textContent !== words) el.textContent = words;
      el.title = "at " + localWords(at, false);
    });
    (root || document).querySelectorAll("time[data-local]:not([data-shown])").forEach(function (el) {
      var at = new Date(el.getAttribute("datetime"));
      if (isNaN(at)) return;
      el.textContent = localWords(at, true);
      el.title = at.toLocaleString();
      el.setAttribute("data-shown", "");
    });
  }

  document.addEventListener("DOMContentLoaded", function () { refresh(); });
  document.addEventListener("htmx:load", function (event) { refresh(event.target); });
  setInterval(refresh, 15000);
})();
