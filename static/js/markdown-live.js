// A streaming answer rendered as it streams, in its final style: the server appends the
// model's text, escaped, to a hidden source element (#step-<id>-text); this script renders
// that text with markdown-it into the visible element beside it ([data-markdown-from]),
// sanitized by DOMPurify, at most once per animation frame. The parser's options and the
// sanitizer's allow-list come from the server's own (chat/markdown.py, markdown_policy,
// in #markdown-policy), so the live render allows nothing the final render removes; when
// the turn ends the server's render replaces the whole step.
//
// Nothing is inserted unsanitized: DOMPurify returns a DOM fragment built from its
// allow-list, and that fragment is what goes into the page.
(function () {
  "use strict";

  var LIVE = "[data-markdown-from]";
  var render = null;  // text -> sanitized DocumentFragment, once set up
  var scheduled = false;
  // A render parses and lays out the whole answer again, so its cost grows with the
  // answer: a 1,500-row table took 700 ms a frame, the page frozen for the whole stream
  // (Stop, typing and scrolling with it). Renders are spaced so they take at most this
  // share of the main thread; a short answer still renders every frame.
  var BUSY_SHARE = 0.25;
  var notBefore = 0;  // performance.now() before which the next render waits
  var waiting = null;  // the timer of a render put off

  function escapeRegExp(text) { return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"); }

  function setUp() {
    var data = document.getElementById("markdown-policy");
    if (!data || !window.markdownit || !window.DOMPurify) return null;
    var policy = JSON.parse(data.textContent);
    var md = window.markdownit(policy.preset, policy.options).enable(policy.enable);
    var purify = window.DOMPurify(window);  // an instance of its own: its hooks are ours only
    var bidi = new RegExp(policy.bidi_controls, "g");
    var attributes = policy.attributes;
    var allAttributes = [];
    Object.keys(attributes).forEach(function (tag) {
      attributes[tag].forEach(function (name) {
        if (allAttributes.indexOf(name) === -1) allAttributes.push(name);
      });
    });
    // As nh3 (ammonia): these schemes, or a relative URL (no scheme at all). A scheme
    // may hold digits (RFC 3986; "ed2k:", "s3:"): DOMPurify's own expression, which this
    // one followed, took those for relative URLs and kept links nh3 removes.
    var uri = new RegExp(
      "^(?:(?:" + policy.url_schemes.map(escapeRegExp).join("|") + "):|[^a-z]|" +
      "[a-z0-9+.\\-]+(?:[^a-z0-9+.\\-:]|$))", "i");
    // nh3's attributes are per tag; DOMPurify's list is one for all tags.
    purify.addHook("uponSanitizeAttribute", function (node, data) {
      var allowed = attributes[node.nodeName.toLowerCase()] || [];
      if (allowed.indexOf(data.attrName) === -1) { data.keepAttr = false; return; }
      if (data.attrName === "style") {
        // filter_style_properties: only these declarations stay.
        data.attrValue = data.attrValue.split(";").filter(function (declaration) {
          var name = declaration.split(":")[0].trim().toLowerCase();
          return declaration.indexOf(":") !== -1 && policy.style_properties.indexOf(name) !== -1;
        }).join(";");
        if (!data.attrValue) data.keepAttr = false;
      }
    });
    purify.addHook("afterSanitizeAttributes", function (node) {
      if (node.nodeName.toLowerCase() === "a") node.setAttribute("rel", policy.link_rel);
    });
    var config = {
      ALLOWED_TAGS: policy.tags,
      ALLOWED_ATTR: allAttributes,
      ALLOWED_URI_REGEXP: uri,
      ALLOW_DATA_ATTR: false,
      ALLOW_ARIA_ATTR: false,
      RETURN_DOM_FRAGMENT: true
    };
    return function (text) {
      // Bidi controls shown, not obeyed, as the server does ("Trojan Source").
      text = text.replace(bidi, function (c) {
        return "<U+" + ("000" + c.charCodeAt(0).toString(16).toUpperCase()).slice(-4) + ">";
      });
      return purify.sanitize(md.render(text), config);
    };
  }

  function renderAll() {
    scheduled = false;
    if (!render) render = setUp();
    if (!render) return;  // no policy or libraries: the server's render stays as sent
    var started = performance.now();
    var rendered = false;
    document.querySelectorAll(LIVE).forEach(function (live) {
      var source = document.getElementById(live.getAttribute("data-markdown-from"));
      if (!source) return;
      var text = source.textContent;
      if (live._markdownSource === text) return;
      live._markdownSource = text;
      live.replaceChildren(text ? render(text) : document.createDocumentFragment());
      live.getBoundingClientRect();  // its layout now, so that it is counted below
      rendered = true;
    });
    if (rendered) {
      var now = performance.now();
      notBefore = now + (now - started) * (1 / BUSY_SHARE - 1);
    }
  }

  // Coalesce: however many deltas arrive in a frame, one render per frame, and none
  // before notBefore (a long answer's renders spaced out; the last delta still renders).
  function schedule() {
    if (scheduled || waiting !== null) return;
    var wait = notBefore - performance.now();
    if (wait > 0) {
      waiting = window.setTimeout(function () { waiting = null; schedule(); }, wait);
      return;
    }
    scheduled = true;
    window.requestAnimationFrame(renderAll);
  }

  document.addEventListener("htmx:wsAfterMessage", schedule);
  document.addEventListener("htmx:afterSettle", schedule);
  document.addEventListener("DOMContentLoaded", renderAll);
})();
