// Tool cards: fold a run's cards when it ends, remember what the reader opened or closed,
// expand/collapse all per run, copy buttons, the raw/pretty toggle of a JSON result and
// "Show all" for a long one.
//
// Which cards are open: a reader's choice for the card (its step id), else their choice for
// the run ("Expand all" / "Collapse all"), else the default: open while the run goes (its
// newest model turn's cards; older turns fold), folded once it has ended. Choices are kept
// in localStorage, so a reload shows what the reader left. The server renders the default
// (open for a running run), so the page reads right before this script runs.
(function () {
  "use strict";

  var PREFIX = "cards:";

  function stored(key) {
    try { return window.localStorage.getItem(PREFIX + key); } catch (e) { return null; }
  }

  // Choices kept at most; past it the oldest runs' and steps' (the lowest ids) go.
  var KEPT = 2000;

  function store(key, value) {
    try {
      if (value === null) window.localStorage.removeItem(PREFIX + key);
      else window.localStorage.setItem(PREFIX + key, value);
      if (value !== null) prune();
    } catch (e) { /* storage off or full: the choice lasts until the reload */ }
  }

  function prune() {
    var keys = [];
    for (var i = 0; i < window.localStorage.length; i++) {
      var key = window.localStorage.key(i);
      if (key && key.indexOf(PREFIX) === 0) keys.push(key);
    }
    if (keys.length <= KEPT) return;
    function id(key) { return Number(key.slice(key.lastIndexOf(":") + 1)) || 0; }
    keys.sort(function (a, b) { return id(a) - id(b); });
    keys.slice(0, keys.length - KEPT).forEach(function (key) {
      window.localStorage.removeItem(key);
    });
  }

  function runId(run) { return run.id.replace(/^run-/, ""); }

  // Going on: running, or waiting for a decision on a tool call (it goes on after).
  function isRunning(run) {
    var status = run.querySelector(".run-status");
    var state = status && status.getAttribute("data-status");
    return state === "running" || state === "waiting";
  }

  // What folds: tool cards, and the text a text strategy's model wrote before its calls.
  var FOLDS = ".tool-card[data-fold-id], .turn-log[data-fold-id]";

  function cards(run) { return run.querySelectorAll(FOLDS); }

  function newestIteration(run) {
    var newest = 0;
    run.querySelectorAll("[data-iteration]").forEach(function (step) {
      newest = Math.max(newest, Number(step.getAttribute("data-iteration")) || 0);
    });
    return newest;
  }

  function setOpen(details, open) {
    if (details.open !== open) details.open = open;
  }

  // Apply the choices and defaults to one run's cards; idempotent.
  function applyRun(run) {
    var running = isRunning(run);
    var runChoice = stored("run:" + runId(run));
    var newest = running ? newestIteration(run) : 0;
    cards(run).forEach(function (card) {
      var choice = stored("step:" + card.getAttribute("data-fold-id"));
      var open;
      if (choice !== null) open = choice === "open";
      else if (runChoice !== null) open = runChoice === "open";
      else open = running && Number(card.getAttribute("data-iteration")) === newest;
      // A call waiting for a decision is always open: its card holds the question.
      if (card.getAttribute("data-status") === "pending") open = true;
      setOpen(card, open);
    });
    if (!running) {
      // The run has ended: its thinking folds with it.
      run.querySelectorAll("details.reasoning[open]").forEach(function (details) {
        if (runChoice !== "open") setOpen(details, false);
      });
    }
    run.setAttribute("data-cards-applied", running ? "running" : "ended");
  }

  // The runs a message may have changed: new ones (appended or replaced whole) and those
  // that were running (a step added, or the run's end).
  function applyChanged() {
    document.querySelectorAll(
      '.run:not([data-cards-applied]), .run[data-cards-applied="running"]'
    ).forEach(applyRun);
  }

  // A reader opening or closing one card (a click, or Enter/Space on its summary):
  // remember it for that card. Not the toggle event: it also fires, later, for the
  // cards this script opens or folds.
  document.addEventListener("click", function (event) {
    var summary = event.target.closest && event.target.closest("summary");
    var card = summary && summary.parentElement;
    if (!card || summary !== card.firstElementChild || !card.matches(FOLDS)) return;
    store("step:" + card.getAttribute("data-fold-id"), card.open ? "closed" : "open");
  });

  function setAll(run, open) {
    store("run:" + runId(run), open ? "open" : "closed");
    cards(run).forEach(function (card) {
      store("step:" + card.getAttribute("data-fold-id"), null);
      setOpen(card, open);
    });
    if (!open) {
      run.querySelectorAll("details.reasoning[open]").forEach(function (d) { setOpen(d, false); });
    }
  }

  function copyText(text, button) {
    function done(ok) {
      var label = button.getAttribute("data-label") || button.textContent;
      button.setAttribute("data-label", label);
      button.textContent = ok ? "Copied" : "Copy failed";
      button.classList.toggle("copied", ok);
      window.clearTimeout(button._copyTimer);
      button._copyTimer = window.setTimeout(function () {
        button.textContent = label;
        button.classList.remove("copied");
      }, 1500);
    }
    function fallback() {
      // Without the Clipboard API (plain http on another host, an older browser).
      var area = document.createElement("textarea");
      area.value = text;
      area.setAttribute("readonly", "");
      area.style.position = "fixed";
      area.style.opacity = "0";
      document.body.appendChild(area);
      area.select();
      var ok = false;
      try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
      area.remove();
      button.focus();
      done(ok);
    }
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(function () { done(true); }, fallback);
    } else {
      fallback();
    }
  }

  // The text a copy button copies: the shown view of its block (raw or pretty).
  function copySource(button) {
    var source = document.getElementById(button.getAttribute("data-copy-from"));
    if (!source) return "";
    var shown = source.querySelector("pre:not([hidden])");
    return (shown || source).innerText;
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("button");
    if (!button) return;
    if (button.hasAttribute("data-cards")) {
      var run = button.closest(".run");
      if (run) setAll(run, button.getAttribute("data-cards") === "expand");
    } else if (button.hasAttribute("data-copy-from")) {
      event.preventDefault();  // a button in a <summary> must not toggle its card
      copyText(copySource(button), button);
    } else if (button.hasAttribute("data-view-toggle")) {
      var card = button.closest(".tool-body");
      var box = card && card.querySelector(".result-box");
      if (!box) return;
      var raw = button.getAttribute("aria-pressed") !== "true";
      box.querySelector('[data-view="pretty"]').hidden = raw;
      box.querySelector('[data-view="raw"]').hidden = !raw;
      button.setAttribute("aria-pressed", raw ? "true" : "false");
      button.textContent = raw ? "Pretty" : "Raw";
      button.title = raw ? "Show the result indented and coloured" :
        "Show the result as the model was sent it";
    } else if (button.hasAttribute("data-show-all")) {
      var body = button.closest(".tool-body");
      var clipped = body && body.querySelector(".result-box");
      if (!clipped) return;
      var all = clipped.classList.toggle("clipped") === false;
      button.setAttribute("aria-expanded", all ? "true" : "false");
      button.textContent = all ? "Show less" : "Show all";
    }
  });

  document.addEventListener("htmx:wsAfterMessage", applyChanged);
  document.addEventListener("DOMContentLoaded", applyChanged);
})();
