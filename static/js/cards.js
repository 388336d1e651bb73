// Tool cards: fold a run's cards when it ends, remember what the reader opened or closed,
// expand/collapse all per run, copy buttons, the raw/pretty toggle of a JSON result and
// "Show all" for a long one.
//
// Which cards are open: a reader's choice for the card (its step id), else their choice for
// the run ("Expand all" / "Collapse all"), else the default: open while the run goes (its
// newest model turn's cards; older turns fold), folded once it has ended. Choices are kept
// in localStorage, so a reload shows what the reader left. The server renders the default
// (open for a running run), so the page reads right before this script runs.
//
// Folding never moves what the reader is looking at: a card they hover or have the focus
// in stays open, and when cards fold the reader's anchor (that card, or else the first
// thing at the top of the view when they have scrolled up from the newest text) is put
// back where it was on screen. Following the newest text at the bottom, chat.js keeps the
// bottom in view.
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

  // The reader is on a card: the focus in it, or the pointer over it, having moved there
  // (not a card that slid under a pointer left still while the page followed the newest
  // text). Where the pointer last moved is kept as its card's id and position, so a card
  // a message replaced (its call ended) is still the one under it.
  var pointer = null;  // {id, x, y}
  document.addEventListener("pointermove", function (event) {
    var card = event.target.closest ? event.target.closest(FOLDS) : null;
    pointer = card ? { id: card.getAttribute("data-fold-id"), x: event.clientX, y: event.clientY } : null;
  }, { passive: true });
  document.documentElement.addEventListener("pointerleave", function () { pointer = null; });
  function isHeld(card) {
    if (card.matches(":focus-within")) return true;
    if (!pointer || card.getAttribute("data-fold-id") !== pointer.id) return false;
    var box = card.getBoundingClientRect();
    return pointer.x >= box.left && pointer.x <= box.right && pointer.y >= box.top && pointer.y <= box.bottom;
  }
  // What the reader holds, taken before a message changes the page (and before chat.js
  // scrolls to follow the bottom): cards by their fold id (a message may replace one),
  // an opened "thinking" as itself.
  function heldNow() {
    var ids = [], elements = [];
    document.querySelectorAll(FOLDS).forEach(function (card) {
      if (isHeld(card)) ids.push(card.getAttribute("data-fold-id"));
    });
    document.querySelectorAll("details.reasoning[open]").forEach(function (details) {
      if (details.matches(":focus-within")) elements.push(details);
    });
    return { ids: ids, elements: elements };
  }
  var heldBefore = { ids: [], elements: [] };
  function held(element) {
    var id = element.getAttribute("data-fold-id");
    return (id !== null && heldBefore.ids.indexOf(id) !== -1) ||
      heldBefore.elements.indexOf(element) !== -1;
  }

  function messagesBox() { return document.getElementById("messages"); }

  // What the reader is looking at, as chat.js tells following the bottom (80 px from it).
  var FOLLOWING_PX = 80;
  var ANCHORS = ".msg, .steps > [id], .run-status, .timeline";

  // Return {element, id, top} for the reader's anchor, or null when there is none to keep
  // (following the newest text at the bottom, nothing held).
  function readerAnchor() {
    var box = messagesBox();
    if (!box) return null;
    var cardsHeld = Array.prototype.filter.call(box.querySelectorAll(FOLDS), isHeld);
    var element = cardsHeld.length ? cardsHeld[cardsHeld.length - 1] : null;
    if (!element) {
      if (box.scrollHeight - box.scrollTop - box.clientHeight < FOLLOWING_PX) return null;
      var viewTop = box.getBoundingClientRect().top;
      var candidates = box.querySelectorAll(ANCHORS);
      for (var i = 0; i < candidates.length; i++) {
        if (candidates[i].getBoundingClientRect().top >= viewTop - 1) {
          element = candidates[i];
          break;
        }
      }
    }
    if (!element) return null;
    return { element: element, id: element.id, top: element.getBoundingClientRect().top,
             held: cardsHeld.length > 0 };
  }

  // Room under the list (px, the CSS variable --kept-room): what is below the anchor may
  // shrink (cards fold, a status line gets shorter) with the list scrolled to its end,
  // where the anchor could only move; and a reader who had scrolled up must stay off the
  // bottom, or chat.js would take them for following it. Used up as the list grows, gone
  // once the reader follows the bottom with nothing held.
  var room = 0;
  function setRoom(box, px) {
    px = Math.max(0, Math.ceil(px));
    if (px === room) return;
    room = px;
    box.style.setProperty("--kept-room", px + "px");
  }

  // Scroll so that the anchor is where it was on screen (found again by id when the
  // message replaced it), making room under the list when it is short of it.
  function keepAnchor(anchor) {
    var box = messagesBox();
    if (!anchor || !box) return;
    var element = anchor.element.isConnected ? anchor.element :
      (anchor.id && document.getElementById(anchor.id));
    if (!element) return;
    var moved = element.getBoundingClientRect().top - anchor.top;
    var below = box.scrollHeight - box.clientHeight - box.scrollTop - moved;
    var short = (anchor.held ? 0 : FOLLOWING_PX) - below;
    if (short > 0) setRoom(box, room + short);
    if (Math.abs(moved) >= 1) box.scrollTop += moved;
  }

  // Apply the choices and defaults to one run's cards; idempotent but for the cards the
  // reader holds, which stay open until they leave them. Return how many cards folded.
  function applyRun(run) {
    var folded = 0;
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
      if (!open && card.open && choice === null && held(card)) return;
      if (!open && card.open) folded += 1;
      setOpen(card, open);
    });
    if (!running) {
      // The run has ended: its thinking folds with it.
      run.querySelectorAll("details.reasoning[open]").forEach(function (details) {
        if (runChoice !== "open" && !held(details)) {
          folded += 1;
          setOpen(details, false);
        }
      });
    }
    run.setAttribute("data-cards-applied", running ? "running" : "ended");
    return folded;
  }

  // The runs a message may have changed: new ones (appended or replaced whole) and those
  // that were running (a step added, or the run's end). Return how many cards folded.
  function applyChanged() {
    var folded = 0;
    document.querySelectorAll(
      '.run:not([data-cards-applied]), .run[data-cards-applied="running"]'
    ).forEach(function (run) { folded += applyRun(run); });
    return folded;
  }

  // The anchor is taken before a message changes the page (and before chat.js follows
  // the bottom), and kept after its cards fold; a card the reader is on is kept in place
  // whatever the message did (the page does not follow the newest text meanwhile).
  var anchorBefore = null;
  var heightBefore = 0;
  document.addEventListener("htmx:wsBeforeMessage", function () {
    anchorBefore = readerAnchor();
    heldBefore = heldNow();
    var box = messagesBox();
    heightBefore = box ? box.scrollHeight : 0;
    // Until the next message: the live answer is drawn after this one (markdown-live.js).
    if (box) box.classList.toggle("holding", !!(anchorBefore && anchorBefore.held));
  });
  document.addEventListener("htmx:wsAfterMessage", function () {
    var box = messagesBox();
    if (box && room) {
      if (!anchorBefore) setRoom(box, 0);
      else if (box.scrollHeight > heightBefore) setRoom(box, room - (box.scrollHeight - heightBefore));
    }
    var folded = applyChanged();
    if (folded || (anchorBefore && anchorBefore.held)) keepAnchor(anchorBefore);
    anchorBefore = null;
  });
  document.addEventListener("DOMContentLoaded", function () {
    heldBefore = heldNow();
    applyChanged();
  });

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

})();
