(function () {
  "use strict";
  var boot = JSON.parse(document.getElementById("pg-boot").textContent);
  var $ = function (id) { return document.getElementById(id); };
  var csrf = ($("pg-csrf") || {}).value || (document.cookie.match(/(?:^|; )csrftoken=([^;]+)/) || [])[1] || "";
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined && text !== null) { e.textContent = text; }
    return e;
  }
  function pretty(v) { return JSON.stringify(v, null, 2); }
  function short(v) { var s = JSON.stringify(v); return s === undefined ? "undefined" : (s.length > 200 ? s.slice(0, 200) + "…" : s); }

  // -- controls -------------------------------------------------------------------------------
  boot.keys.forEach(function (k) { $("pg-key").appendChild(el("option", {value: String(k.id)}, k.name)); });
  boot.models.forEach(function (m) { $("pg-models").appendChild(el("option", {value: m})); });
  boot.protocols.forEach(function (p) { $("pg-protocol").appendChild(el("option", {value: p}, p)); });
  if (boot.models.length) { $("pg-model").value = boot.models[0]; }
  function useTemplate() {
    var t = JSON.parse(JSON.stringify(boot.templates[$("pg-protocol").value] || {}));
    t.model = $("pg-model").value;
    $("pg-body").value = pretty(t);
  }
  $("pg-template").addEventListener("click", function () { useTemplate(); schedule(); });
  useTemplate();

  // -- rule editors ---------------------------------------------------------------------------
  var formRegistry = JSON.parse((document.getElementById("pg-form-registry") || {textContent: "{}"}).textContent);
  function schemaForm(tid, config, ta, id) {
    if (!formRegistry[tid] || !window.TransformRuleForm) { return null; }
    var wrap = el("div", {"class": "inline-related pg-rule-form", id: "pg-form-" + id});
    var picker = el("select", {"class": "transform-picker", hidden: "hidden", "aria-hidden": "true"});
    var o = el("option", {value: tid}, tid); o.selected = true; picker.appendChild(o);
    wrap.appendChild(picker);
    var container = el("div", {"class": "schema-config", "data-registry-id": "pg-form-registry", "data-errors": "[]"});
    var hidden = el("input", {type: "hidden"}); hidden.value = JSON.stringify(config || {});
    container.appendChild(hidden);
    container.appendChild(el("div", {"class": "schema-config-form"}));
    wrap.appendChild(container);
    function pull() {
      var v;
      try { v = JSON.parse(hidden.value || "{}"); } catch (e) { return; }
      var cur = null;
      try { cur = JSON.stringify(JSON.parse(ta.value || "{}")); } catch (e) { cur = null; }
      if (JSON.stringify(v) !== cur) { ta.value = pretty(v); schedule(); }
    }
    container.addEventListener("input", pull);
    container.addEventListener("change", pull);
    wrap._init = function () { window.TransformRuleForm.initAll(wrap); };
    return wrap;
  }
  var editors = {};
  boot.rules.forEach(function (r) {
    var box = el("div", {"class": "rule-ed", "data-rule": String(r.id)});
    var head = el("div", {"class": "row"});
    var en = el("input", {type: "checkbox", id: "pg-en-" + r.id});
    en.checked = r.enabled;
    head.appendChild(en);
    var name = r.admin_url ? el("a", {href: r.admin_url, target: "_blank"}, "#" + r.id + " " + r.transform) : el("b", {}, "#" + r.id + " " + r.transform);
    head.appendChild(name);
    head.appendChild(el("span", {"class": "muted"}, r.scope + (r.owner ? " · " + r.owner : "") + " · " + r.phase + (r.models ? " · " + r.models.join(", ") : "")));
    var mark = el("span", {"class": "edited"}, "");
    head.appendChild(mark);
    box.appendChild(head);
    var ta = el("textarea", {id: "pg-cfg-" + r.id, spellcheck: "false", "aria-label": "config of rule " + r.id});
    ta.value = pretty(r.config);
    // The admin's schema-generated config form (transforms/rule_form.js) when the transform is
    // known; the JSON text stays available underneath and is what the run sends.
    var formBox = schemaForm(r.transform, r.config, ta, r.id);
    if (formBox) {
      box.appendChild(formBox);
      var det = el("details", {"class": "pg-json"});
      det.appendChild(el("summary", {}, "config as JSON"));
      det.appendChild(ta);
      box.appendChild(det);
    } else {
      box.appendChild(ta);
    }
    var msg = el("div", {"class": "err"});
    box.appendChild(msg);
    $("pg-rules").appendChild(box);
    editors[r.id] = {rule: r, en: en, ta: ta, msg: msg, mark: mark, original: JSON.stringify(r.config)};
    en.addEventListener("change", schedule);
    ta.addEventListener("input", schedule);
  });
  if (!boot.rules.length) { $("pg-rules").appendChild(el("p", {"class": "muted"}, "No rules configured.")); }
  Array.prototype.forEach.call(document.querySelectorAll(".pg-rule-form"), function (w) { if (w._init) { w._init(); } });

  // -- unsaved new rules ------------------------------------------------------------------------
  var added = [], addedSeq = 0;
  Object.keys(boot.transforms).forEach(function (tid) { $("pg-add-transform").appendChild(el("option", {value: tid}, tid)); });
  function opt(sel, value, label) { var o = el("option", {value: value}, label); sel.appendChild(o); return o; }
  $("pg-add-rule").addEventListener("click", function () {
    var tid = $("pg-add-transform").value, meta = boot.transforms[tid], n = ++addedSeq;
    var box = el("div", {"class": "rule-ed new-rule", "data-new": String(n)});
    var head = el("div", {"class": "row"});
    head.appendChild(el("b", {}, "new " + tid));
    var scope = el("select", {"aria-label": "scope", "class": "new-scope"});
    meta.scopes.forEach(function (sc) {
      if (sc === "global") { opt(scope, "global", "global"); }
      else if (sc === "provider") { boot.providers.forEach(function (p) { opt(scope, "provider:" + p.id, "provider " + p.name); }); }
      else if (sc === "api_key") { boot.keys.forEach(function (k) { opt(scope, "api_key:" + k.id, "key " + k.name); }); }
    });
    var phase = el("select", {"aria-label": "phase", "class": "new-phase"});
    meta.phases.forEach(function (ph) { opt(phase, ph, ph); });
    var models = el("input", {type: "text", placeholder: "model globs, comma separated (empty: all)", size: "24", "class": "new-models"});
    var pos = el("input", {type: "number", value: "100", style: "width:60px", "aria-label": "position", "class": "new-position"});
    var rm = el("button", {type: "button", "class": "button"}, "remove");
    [scope, phase, models, pos, rm].forEach(function (x) { head.appendChild(x); });
    box.appendChild(head);
    var ta = el("textarea", {spellcheck: "false", "aria-label": "config of new rule " + n, "class": "new-config"});
    ta.value = pretty(meta.defaults || {});
    box.appendChild(ta);
    var msg = el("div", {"class": "err"}); box.appendChild(msg);
    $("pg-new-rules").appendChild(box);
    var rec = {transform: tid, box: box, scope: scope, phase: phase, models: models, pos: pos, ta: ta, msg: msg};
    added.push(rec);
    rm.addEventListener("click", function () { added.splice(added.indexOf(rec), 1); box.remove(); schedule(); });
    [scope, phase].forEach(function (x) { x.addEventListener("change", schedule); });
    [models, pos, ta].forEach(function (x) { x.addEventListener("input", schedule); });
    schedule();
  });
  function newRules(out) {
    var bad = false;
    added.forEach(function (a) {
      a.ta.classList.remove("bad"); a.msg.textContent = "";
      var cfg;
      try { cfg = JSON.parse(a.ta.value || "{}"); } catch (e) { a.ta.classList.add("bad"); a.msg.textContent = "not valid JSON"; bad = true; return; }
      var parts = a.scope.value.split(":"), globs = a.models.value.split(",").map(function (g) { return g.trim(); }).filter(Boolean);
      var o = {transform: a.transform, scope: parts[0], phase: a.phase.value, config: cfg,
               models: globs.length ? globs : null, position: Number(a.pos.value) || 0};
      if (parts[0] === "provider") { o.provider = Number(parts[1]); }
      if (parts[0] === "api_key") { o.api_key = Number(parts[1]); }
      a.index = out.length;
      out.push(o);
    });
    return !bad;
  }

  function overrides() {
    var out = [], bad = false;
    Object.keys(editors).forEach(function (id) {
      var ed = editors[id], cfg;
      ed.ta.classList.remove("bad"); ed.msg.textContent = "";
      try { cfg = JSON.parse(ed.ta.value || "{}"); } catch (e) { ed.ta.classList.add("bad"); ed.msg.textContent = "not valid JSON"; bad = true; return; }
      var changed = JSON.stringify(cfg) !== ed.original, toggled = ed.en.checked !== ed.rule.enabled;
      ed.mark.textContent = (changed || toggled) ? "edited" : "";
      if (changed || toggled) {
        var o = {id: ed.rule.id};
        if (changed) { o.config = cfg; }
        if (toggled) { o.enabled = ed.en.checked; }
        out.push(o);
      }
    });
    if (!newRules(out)) { bad = true; }
    return bad ? null : out;
  }

  // -- running --------------------------------------------------------------------------------
  var timer = null, seq = 0;
  function schedule() { if (!$("pg-auto").checked) { return; } clearTimeout(timer); timer = setTimeout(function () { run(false); }, 250); }
  ["pg-body", "pg-model"].forEach(function (id) { $(id).addEventListener("input", schedule); });
  ["pg-key", "pg-protocol", "pg-stream"].forEach(function (id) { $(id).addEventListener("change", schedule); });
  $("pg-run").addEventListener("click", function () { run(false); });
  $("pg-send").addEventListener("click", function () { run(true); });

  function run(send) {
    var body;
    try { body = JSON.parse($("pg-body").value); } catch (e) { showError("The body is not valid JSON: " + e.message); return; }
    var rules = overrides();
    if (rules === null) { showError("A rule's config is not valid JSON."); return; }
    var payload = {protocol: $("pg-protocol").value, body: body, api_key: $("pg-key").value || null,
                   stream: $("pg-stream").value || null, model: $("pg-model").value || null, rules: rules, send: !!send};
    var mine = ++seq;
    $("pg-status").textContent = send ? "sending…" : "running…";
    fetch(boot.api_url || "/api/playground/", {method: "POST", credentials: "same-origin",
      headers: {"Content-Type": "application/json", "X-CSRFToken": csrf}, body: JSON.stringify(payload)})
      .then(function (r) { return r.json().then(function (j) { return {status: r.status, data: j}; }); })
      .then(function (res) {
        if (mine !== seq) { return; }
        $("pg-status").textContent = "done";
        if (res.status === 400) { showRuleErrors(res.data.errors || {}); showError(flat(res.data.errors, "")); return; }
        if (res.status !== 200) { showError("HTTP " + res.status + ": " + pretty(res.data)); return; }
        render(res.data);
      })
      .catch(function (e) { if (mine === seq) { $("pg-status").textContent = ""; showError(String(e)); } });
  }
  function showRuleErrors(errors) {
    var list = overrides() || [];
    Object.keys((errors && errors.rules) || {}).forEach(function (n) {
      var o = list[Number(n)];
      if (o && editors[o.id]) { editors[o.id].ta.classList.add("bad"); editors[o.id].msg.textContent = flat(errors.rules[n], ""); }
      added.forEach(function (a) { if (a.index === Number(n)) { a.ta.classList.add("bad"); a.msg.textContent = flat(errors.rules[n], ""); } });
    });
  }
  function flat(errors, prefix) {
    if (Array.isArray(errors)) { return errors.map(function (m) { return (prefix ? prefix + ": " : "") + m; }).join("\n"); }
    if (errors && typeof errors === "object") {
      return Object.keys(errors).map(function (k) { return flat(errors[k], /^\d+$/.test(k) ? prefix : (prefix ? prefix + "." : "") + k); }).join("\n");
    }
    return String(errors);
  }
  function showError(text) { $("pg-error-box").hidden = !text; $("pg-error").textContent = text || ""; }

  function changeList(changes) {
    var box = el("div", {"class": "changes"});
    (changes || []).forEach(function (c) {
      var line = el("div", {"class": "chg " + c.op});
      line.appendChild(el("span", {"class": "op"}, c.op));
      line.appendChild(el("code", {}, c.path));
      var txt = c.op === "added" ? " = " + short(c.new) : c.op === "removed" ? " (was " + short(c.old) + ")" : ": " + short(c.old) + " → " + short(c.new);
      line.appendChild(document.createTextNode(txt));
      box.appendChild(line);
    });
    return box;
  }
  function steps(target, rows, empty) {
    target.textContent = "";
    target.classList.remove("muted");
    if (!rows || !rows.length) { target.appendChild(el("p", {"class": "muted"}, empty)); return; }
    rows.forEach(function (s) {
      var d = el("div", {"class": "step" + (s.changed ? " changed" : ""), "data-ordinal": String(s.ordinal), "data-transform": s.transform});
      var h = el("div");
      h.appendChild(el("b", {}, s.ordinal + ". " + s.transform));
      h.appendChild(el("span", {"class": "muted"}, "  " + s.scope + " · " + s.phase + (s.rule_id ? " · rule #" + s.rule_id : " · unsaved rule")));
      h.appendChild(el("span", {"class": "badge"}, s.changed ? s.changes.length + " change" + (s.changes.length === 1 ? "" : "s") : "no change"));
      d.appendChild(h);
      if (s.changed) { d.appendChild(changeList(s.changes)); }
      target.appendChild(d);
    });
  }
  function kv(target, pairs) {
    target.textContent = ""; target.classList.remove("muted");
    var g = el("div", {"class": "kv"});
    pairs.forEach(function (p) { g.appendChild(el("b", {}, p[0])); g.appendChild(el("span", {}, p[1] === null || p[1] === undefined ? "—" : String(p[1]))); });
    target.appendChild(g);
  }
  function render(rep) {
    showError(rep.error ? rep.error.stage + ": " + rep.error.code + " — " + rep.error.message : "");
    var r = rep.routing;
    if (r && r.provider) {
      kv($("pg-routing"), [["logical model", rep.logical_model + (rep.redirected ? " (redirected from " + rep.model + ")" : "")],
        ["provider", r.provider], ["channel", r.channel + " (" + r.upstream_protocol + ")"], ["upstream model", r.upstream_model],
        ["stream", rep.stream ? "yes" : "no"],
        ["candidates", (r.candidates || []).map(function (c) { return c.provider + " [" + c.channels.map(function (ch) { return ch.channel + " w" + ch.weight; }).join(", ") + "]"; }).join("; ")]]);
    } else {
      kv($("pg-routing"), [["logical model", rep.logical_model], ["decision", "no route"]]);
    }
    var tb = $("pg-match").querySelector("tbody");
    tb.textContent = "";
    (rep.rules || []).forEach(function (x) {
      var tr = el("tr", {"data-rule": String(x.rule_id), "class": "st-" + x.status});
      tr.appendChild(el("td", {}, x.rule_id === null ? "new" : "#" + x.rule_id));
      tr.appendChild(el("td", {}, x.transform + (x.edited ? " (edited)" : "")));
      tr.appendChild(el("td", {}, x.scope + (x.owner_name ? " · " + x.owner_name : "")));
      tr.appendChild(el("td", {}, x.phase));
      tr.appendChild(el("td", {"class": "st-" + x.status}, x.status));
      tr.appendChild(el("td", {}, x.reason));
      tb.appendChild(tr);
    });
    steps($("pg-chain"), rep.request_chain, "No request rule ran.");
    var up = $("pg-upstream");
    up.textContent = ""; up.classList.remove("muted");
    if (rep.upstream) {
      up.appendChild(el("div", {"class": "mono"}, "POST " + rep.upstream.url + (rep.upstream.stream ? "  (stream)" : "")));
      up.appendChild(el("pre", {id: "pg-upstream-headers"}, pretty(rep.upstream.headers)));
      up.appendChild(el("pre", {id: "pg-upstream-body"}, pretty(rep.upstream.body)));
    } else { up.appendChild(el("p", {"class": "muted"}, "No upstream request.")); }
    var sent = rep.sent;
    $("pg-sent-box").hidden = !sent;
    if (sent) {
      var s = $("pg-sent");
      s.textContent = "";
      var head = el("div", {}, "Upstream status " + (sent.status === null ? "—" : sent.status) + (sent.latency_ms !== null ? " · " + sent.latency_ms + " ms" : ""));
      s.appendChild(head);
      if (sent.error) { s.appendChild(el("div", {"class": "err"}, sent.error)); }
      s.appendChild(el("h3", {}, "Response rules"));
      var rc = el("div"); s.appendChild(rc); steps(rc, sent.response_chain, "No response rule ran.");
      s.appendChild(el("h3", {}, "Client's answer"));
      s.appendChild(el("pre", {id: "pg-client-answer"}, sent.client_stream || pretty(sent.client_response)));
      s.appendChild(el("h3", {}, "Upstream body"));
      s.appendChild(el("pre", {}, typeof sent.upstream_body === "string" ? sent.upstream_body : pretty(sent.upstream_body)));
    }
  }
  run(false);
})();
