(function () {
  "use strict";
  var tabs = Array.prototype.slice.call(document.querySelectorAll(".tab"));
  function show(id) {
    tabs.forEach(function (t) {
      var on = t.getAttribute("data-tab") === id;
      t.classList.toggle("active", on);
      t.setAttribute("aria-selected", on ? "true" : "false");
      var panel = document.getElementById("panel-" + t.getAttribute("data-tab"));
      if (panel) { panel.hidden = !on; }
    });
  }
  tabs.forEach(function (t) {
    t.addEventListener("click", function () {
      var id = t.getAttribute("data-tab");
      show(id);
      history.replaceState(null, "", "#" + id);
    });
  });
  var wanted = location.hash.replace(/^#/, "");
  if (tabs.length) { show(tabs.some(function (t) { return t.getAttribute("data-tab") === wanted; }) ? wanted : tabs[0].getAttribute("data-tab")); }
  // Attempt links keep the open tab.
  Array.prototype.forEach.call(document.querySelectorAll("a.attempt"), function (a) {
    a.addEventListener("click", function () { a.href = a.href.split("#")[0] + location.hash; });
  });
  Array.prototype.forEach.call(document.querySelectorAll("button.copy"), function (b) {
    b.addEventListener("click", function () {
      var el = document.querySelector(b.getAttribute("data-copy"));
      if (!el) { return; }
      var text = el.tagName === "OL" ? Array.prototype.map.call(el.children, function (li) { return li.textContent; }).join("\n") : el.textContent;
      var done = function () { b.textContent = "Copied"; setTimeout(function () { b.textContent = "Copy"; }, 1200); };
      if (navigator.clipboard && window.isSecureContext) { navigator.clipboard.writeText(text).then(done); }
      else { var r = document.createRange(); r.selectNodeContents(el); var s = getSelection(); s.removeAllRanges(); s.addRange(r); document.execCommand("copy"); s.removeAllRanges(); done(); }
    });
  });
  // Scroll the two sides of a diff together.
  Array.prototype.forEach.call(document.querySelectorAll(".diff"), function (d) {
    var sides = d.querySelectorAll(".lines");
    if (sides.length !== 2) { return; }
    var lock = false;
    [0, 1].forEach(function (i) {
      sides[i].addEventListener("scroll", function () {
        if (lock) { lock = false; return; }
        lock = true;
        sides[1 - i].scrollTop = sides[i].scrollTop;
        sides[1 - i].scrollLeft = sides[i].scrollLeft;
      });
    });
  });
  // Chips: open the rule's own before/after diff.
  Array.prototype.forEach.call(document.querySelectorAll(".chip-open"), function (b) {
    b.addEventListener("click", function () {
      var box = document.getElementById("chip-diff-" + b.getAttribute("data-chip"));
      if (!box) { return; }
      var open = box.hidden;
      Array.prototype.forEach.call(document.querySelectorAll(".chip-diff"), function (d) { d.hidden = true; });
      Array.prototype.forEach.call(document.querySelectorAll(".chip-open"), function (x) { x.setAttribute("aria-expanded", "false"); });
      box.hidden = !open;
      b.setAttribute("aria-expanded", open ? "true" : "false");
    });
  });
  // JSON panels as a collapsible tree with search (the <pre> stays for Copy).
  function node(key, value, depth) {
    var label = key === null ? "" : key;
    if (value !== null && typeof value === "object") {
      var isArr = Array.isArray(value), keys = isArr ? value.map(function (_, i) { return i; }) : Object.keys(value);
      var d = document.createElement("details");
      if (depth < 2) { d.open = true; }
      var sum = document.createElement("summary");
      if (label !== "") { var k = document.createElement("span"); k.className = "k"; k.textContent = label + ": "; sum.appendChild(k); }
      sum.appendChild(document.createTextNode(isArr ? "[" : "{"));
      var c = document.createElement("span"); c.className = "count"; c.textContent = " " + keys.length + (isArr ? " items ]" : " keys }"); sum.appendChild(c);
      d.appendChild(sum);
      keys.forEach(function (kk) { d.appendChild(node(isArr ? "[" + kk + "]" : kk, value[kk], depth + 1)); });
      return d;
    }
    var leaf = document.createElement("div"); leaf.className = "leaf";
    if (label !== "") { var kl = document.createElement("span"); kl.className = "k"; kl.textContent = label + ": "; leaf.appendChild(kl); }
    var v = document.createElement("span");
    v.className = typeof value === "string" ? "s" : value === null ? "z" : "n";
    v.textContent = JSON.stringify(value);
    leaf.appendChild(v);
    return leaf;
  }
  Array.prototype.forEach.call(document.querySelectorAll("pre.code.json"), function (pre) {
    var data;
    try { data = JSON.parse(pre.textContent); } catch (e) { return; }
    if (data === null || typeof data !== "object") { return; }
    var tree = document.createElement("div"); tree.className = "tree"; tree.appendChild(node(null, data, 0));
    var tools = document.createElement("div"); tools.className = "tree-tools";
    var search = document.createElement("input"); search.type = "search"; search.placeholder = "Search keys and values"; search.className = "tree-search";
    var count = document.createElement("span"); count.className = "muted";
    var raw = document.createElement("button"); raw.type = "button"; raw.textContent = "Raw";
    tools.appendChild(search); tools.appendChild(count); tools.appendChild(raw);
    pre.hidden = true;
    pre.parentNode.insertBefore(tools, pre);
    pre.parentNode.insertBefore(tree, pre);
    raw.addEventListener("click", function () { pre.hidden = !pre.hidden; tree.hidden = !pre.hidden; raw.textContent = pre.hidden ? "Raw" : "Tree"; });
    var timer = null;
    search.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(function () {
        var q = search.value.trim().toLowerCase(), hits = 0;
        Array.prototype.forEach.call(tree.querySelectorAll(".hit"), function (h) { h.classList.remove("hit"); });
        if (!q) { count.textContent = ""; return; }
        Array.prototype.forEach.call(tree.querySelectorAll(".k, .s, .n, .z"), function (span) {
          if (span.textContent.toLowerCase().indexOf(q) === -1) { return; }
          hits += 1;
          span.classList.add("hit");
          for (var p = span.parentNode; p && p !== tree; p = p.parentNode) { if (p.tagName === "DETAILS") { p.open = true; } }
        });
        count.textContent = hits + " match" + (hits === 1 ? "" : "es");
        var first = tree.querySelector(".hit"); if (first) { first.scrollIntoView({block: "nearest"}); }
      }, 150);
    });
  });
})();
