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
})();
