// The live region (#announcer, aria-live="polite"): says when a step starts and ends,
// when a run ends, and when the connection is lost or closed; never per token. And a box
// that scrolls (a long result, arguments, reasoning) is made focusable, so the keyboard
// can scroll it too.
//
// It watches the page rather than htmx's events: a step arrives by several paths (an
// out-of-band swap by id, an append, chat.js replacing a step a late page already had,
// a whole run caught up after a reconnect), and all of them end as a step element with
// a new data-status in the page. Each element's status is announced once: a run sent
// again whole after a reconnect says nothing new, and nothing is said for what the page
// loaded with.
(function () {
  "use strict";

  // Lines kept in the region: enough for a burst of parallel tool calls to be read in
  // turn (each line is a new node, announced as an addition), few enough to stay small.
  var KEEP = 8;
  var STEP_ID = /^step-\d+$/;
  var RUN_STATUS_ID = /^run-\d+-status$/;
  var ERROR_CHARS = 160;
  var announced = {};  // element id -> the status already announced (or found on load)
  // Boxes that may scroll on their own (app.css gives them a max-height).
  var SCROLL_BOXES = "pre, .reasoning-text";

  function region() { return document.getElementById("announcer"); }

  function announce(text) {
    var box = region();
    if (!box || !text) return;
    var line = document.createElement("p");
    line.textContent = text;
    box.appendChild(line);
    while (box.childElementCount > KEEP) box.removeChild(box.firstElementChild);
  }

  function textOf(element, selector) {
    var found = element.querySelector(selector);
    return found ? found.textContent.replace(/\s+/g, " ").trim() : "";
  }

  function describeTool(element, status) {
    var name = element.getAttribute("data-tool") || "a tool";
    if (status === "running") return "Calling " + name;
    if (status === "pending") return name + " waits for your approval";
    if (status === "success") {
      var duration = textOf(element, ".duration");
      return name + " finished" + (duration ? " in " + duration : "");
    }
    // The model's reply did not parse: no tool ran, whatever name it gave.
    if (element.classList.contains("parse-error")) return "Format error in the model's reply";
    // Closed by Stop or a server restart before it answered: it did not fail.
    if (status === "error" && element.classList.contains("unfinished")) {
      return name + " did not finish";
    }
    if (status === "error") return name + " failed";
    return "";
  }

  function describeRun(element, status) {
    var errors = textOf(element, ".tool-errors");
    var note = errors ? " (" + errors + ")" : "";
    var why = textOf(element, ".run-error").slice(0, ERROR_CHARS);
    switch (status) {
      case "running": return "Agent working";
      case "succeeded": return "Answer ready" + note;
      case "cancelled": return "Run stopped";
      case "failed": return "Run failed" + (why ? ": " + why : "");
      case "max_iterations": return "Run ended: model turn limit reached" + note;
      case "interrupted": return "Run interrupted" + (why ? ": " + why : "");
      case "time_limit": return "Run ended: time limit reached" + note;
      case "repeated_failure": return "Run stopped: the same tool call kept failing" + note;
      case "budget_exceeded": return "Run stopped: its budget is used up" + note;
      case "waiting": return "A tool call waits for your approval";
      default: return "Run ended: " + textOf(element, ".badge");
    }
  }

  // Return what to say for an element whose status is new, or "" for nothing.
  function describe(element, status) {
    if (RUN_STATUS_ID.test(element.id)) return describeRun(element, status);
    var kind = element.getAttribute("data-kind");
    if (kind === "tool_call") return describeTool(element, status);
    // A model turn's start is the run's, its end the answer's: only a failure is news.
    if (kind === "model_turn" && status === "error" && !closedByRunEnd(element)) {
      return "Model turn failed";
    }
    return "";
  }

  // Return true for a model turn that the end of its run closed (Stop, or a restart) rather
  // than a failure of its own: it is marked a partial answer, or its run, sent whole with
  // it, is stopped or interrupted. The run's own line ("Run stopped") says what happened.
  function closedByRunEnd(turn) {
    if (turn.classList.contains("partial")) return true;
    var run = turn.closest(".run");
    var line = run && run.querySelector(".run-status");
    var ended = line ? line.getAttribute("data-status") : "";
    return ended === "cancelled" || ended === "interrupted";
  }

  function watched(element) {
    return !!element.id && element.hasAttribute("data-status") &&
      (STEP_ID.test(element.id) || RUN_STATUS_ID.test(element.id));
  }

  function visit(element, quietly) {
    var status = element.getAttribute("data-status");
    if (announced[element.id] === status) return;
    announced[element.id] = status;
    // History loaded on request (static/js/earlier.js) is not news: say nothing per step.
    if (!quietly && !element.closest("[data-quiet]")) announce(describe(element, status));
  }

  // Visit ``root`` and the watched elements inside it, in document order.
  function visitTree(root, quietly) {
    if (root.nodeType !== 1) return;  // text: a streamed token
    if (watched(root)) visit(root, quietly);
    if (!root.firstElementChild) return;
    var inside = root.querySelectorAll("[data-status][id]");
    for (var i = 0; i < inside.length; i++) {
      if (watched(inside[i])) visit(inside[i], quietly);
    }
  }

  // Give each box under ``root`` that overflows a tab stop (WCAG 2.1.1: a region that
  // scrolls must be reachable without a mouse). Boxes that fit get none: no useless stops.
  // A box inside a closed fold has no size yet: it is checked when its fold opens.
  function reachScrollBoxes(root) {
    if (root.nodeType !== 1) return;
    var boxes = Array.prototype.slice.call(root.querySelectorAll(SCROLL_BOXES));
    if (root.matches(SCROLL_BOXES)) boxes.push(root);
    for (var i = 0; i < boxes.length; i++) {
      var box = boxes[i];
      if (box.hasAttribute("tabindex")) continue;
      if (box.scrollHeight > box.clientHeight + 1 || box.scrollWidth > box.clientWidth + 1) {
        box.setAttribute("tabindex", "0");
      }
    }
  }

  var observer = new MutationObserver(function (records) {
    for (var i = 0; i < records.length; i++) {
      var record = records[i];
      if (record.type === "attributes") {
        if (watched(record.target)) visit(record.target, false);
        continue;
      }
      for (var j = 0; j < record.addedNodes.length; j++) {
        visitTree(record.addedNodes[j], false);
        reachScrollBoxes(record.addedNodes[j]);
      }
    }
  });

  // The connection: lost (once per loss), back, or closed for good (chat.js has set
  // #connection's text by now: its listener was added first).
  var lost = false;
  document.addEventListener("htmx:wsClose", function () {
    var connection = document.getElementById("connection");
    if (!connection) return;
    if (connection.getAttribute("data-state") === "ended") {
      announce("Connection closed: " + connection.textContent);
    } else if (!lost) {
      lost = true;
      announce("Connection lost: reconnecting");
    }
  });
  document.addEventListener("htmx:wsOpen", function () {
    if (lost) announce("Connection back");
    lost = false;
  });

  // "toggle" does not bubble: listened for in the capture phase.
  document.addEventListener("toggle", function (event) {
    if (event.target.open) reachScrollBoxes(event.target);
  }, true);

  document.addEventListener("DOMContentLoaded", function () {
    visitTree(document.body, true);
    reachScrollBoxes(document.body);
    observer.observe(document.body, {
      childList: true, subtree: true, attributes: true, attributeFilter: ["data-status"]
    });
  });
})();
