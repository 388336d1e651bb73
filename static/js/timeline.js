// A run's timeline (templates/chat/_timeline.html): running bars grow to "now" between
// the server's redraws, a bar scrolls to its step, an opened timeline stays open when
// its run is re-rendered whole. The bars themselves are drawn by the server. Every time
// that says "so far" ([data-so-far-ms]: the timeline's summary, a running tool call's
// card) counts on from what the server drew, and a running model turn's "waiting for the
// first token" becomes "streaming" when its text or reasoning arrives.
(function () {
  "use strict";

  var TICK_MS = 250;
  var OPEN_KEY = "timeline-open";

  function formatMs(ms) {
    // As chat_tags.duration: "850 ms", "2.4 s".
    return ms < 1000 ? ms + " ms" : (ms / 1000).toFixed(1) + " s";
  }

  // Grow the bars of running timelines: the server drew them at "now" when it sent them;
  // the time since this page received them is added to the axis and the running bars.
  function tick() {
    var now = performance.now();
    document.querySelectorAll("[data-so-far-ms]").forEach(function (time) {
      if (time._tlReceived === undefined) { time._tlReceived = now; return; }
      var ms = Number(time.getAttribute("data-so-far-ms")) + Math.round(now - time._tlReceived);
      var text = formatMs(ms);
      if (time.textContent !== text) time.textContent = text;
    });
    document.querySelectorAll("[data-tl-first-token-wait]").forEach(function (flag) {
      var link = flag.closest(".tl-link");
      var id = link && link.getAttribute("data-step");
      var text = id && document.getElementById("step-" + id + "-text");
      var reasoning = id && document.getElementById("step-" + id + "-reasoning");
      if ((text && text.textContent) || (reasoning && reasoning.textContent)) {
        flag.removeAttribute("data-tl-first-token-wait");
        flag.textContent = "streaming";
      }
    });
    document.querySelectorAll(".tl-body[data-running]").forEach(function (body) {
      if (body._tlReceived === undefined) { body._tlReceived = now; return; }
      var details = body.closest("details");
      if (details && !details.open) return;
      var elapsed = Math.round(now - body._tlReceived);
      var span = Number(body.dataset.spanMs) + elapsed;
      body.querySelectorAll(".tl-row").forEach(function (row) {
        var bar = row.querySelector(".tl-bar");
        if (!bar) return;
        var start = Number(bar.dataset.startMs);
        var end = Number(bar.dataset.endMs) + (row.classList.contains("running") ? elapsed : 0);
        bar.style.left = (100 * start / span).toFixed(3) + "%";
        bar.style.width = (100 * (end - start) / span).toFixed(3) + "%";
        if (row.classList.contains("running")) {
          var label = row.querySelector("[data-tl-duration]");
          if (label) label.textContent = formatMs(end - start);
        }
        // A held call's wait for a decision grows while nobody has decided.
        var wait = row.querySelector(".tl-decision");
        if (wait) {
          var from = Number(wait.dataset.startMs);
          var to = Number(wait.dataset.endMs) + (row.classList.contains("waiting") ? elapsed : 0);
          wait.style.left = (100 * from / span).toFixed(3) + "%";
          wait.style.width = (100 * (to - from) / span).toFixed(3) + "%";
        }
      });
    });
  }
  setInterval(tick, TICK_MS);

  // A bar scrolls to its step's card, opening it if it is folded, and moves focus there.
  document.addEventListener("click", function (event) {
    var link = event.target.closest && event.target.closest(".tl-link");
    if (!link) return;
    var step = document.getElementById("step-" + link.dataset.step);
    if (!step) return;  // not on this page: the plain link goes there
    event.preventDefault();
    if (step.tagName === "DETAILS") step.open = true;
    step.scrollIntoView({ behavior: "smooth", block: "center" });
    if (!step.hasAttribute("tabindex")) step.setAttribute("tabindex", "-1");
    step.focus({ preventScroll: true });
    step.classList.add("tl-flash");
    setTimeout(function () { step.classList.remove("tl-flash"); }, 1200);
  });

  // Remember which chat timelines are open (this tab), so a run sent whole again (its end,
  // a reconnect) or a reload keeps the reader's choice.
  function openSet() {
    try { return JSON.parse(sessionStorage.getItem(OPEN_KEY) || "[]"); } catch (e) { return []; }
  }
  function remember(id, open) {
    var ids = openSet().filter(function (x) { return x !== id; });
    if (open) ids.push(id);
    try { sessionStorage.setItem(OPEN_KEY, JSON.stringify(ids.slice(-200))); } catch (e) { /* full or off */ }
  }
  document.addEventListener("toggle", function (event) {
    var details = event.target;
    if (!details.matches || !details.matches("details[data-timeline]")) return;
    if (details.closest(".trace-timeline")) return;  // the admin's is always open
    remember(details.dataset.timeline, details.open);
  }, true);
  function restore(root) {
    var found = root.querySelectorAll("details[data-timeline]");
    if (!found.length) return;
    var ids = openSet();
    found.forEach(function (details) {
      if (ids.indexOf(details.dataset.timeline) !== -1) details.open = true;
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    restore(document);
    new MutationObserver(function (mutations) {
      mutations.forEach(function (m) {
        m.addedNodes.forEach(function (node) { if (node.querySelectorAll) restore(node); });
      });
    }).observe(document.body, { childList: true, subtree: true });
  });
})();
