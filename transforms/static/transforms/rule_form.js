/* Schema-driven transform rule editor for the Django admin.
 *
 * Every rule form holds its config as JSON in a hidden input (SchemaConfigWidget). This script
 * builds a form from the selected transform's JSON Schema (embedded in the page by the chain
 * template or the widget), keeps the hidden input in sync, swaps the form when the transform
 * changes, puts the server's "dotted.path: message" errors next to the fields they name, and
 * adds up/down reordering to chain editors. No external libraries.
 *
 * Schema shape -> control: enum -> select; boolean -> checkbox; integer/number -> number input
 * (minimum/maximum); string -> text input; string with format "multiline" -> textarea; array of
 * scalars -> repeatable rows; array of objects -> repeatable sub-forms; object with properties
 * -> group; object without properties -> key/value rows; anything else -> typed JSON value.
 * Unset optional fields are omitted (an empty optional string counts as unset); keys the schema
 * does not describe are kept as they were.
 */
(function () {
  "use strict";

  const UNSET = undefined;
  const registries = {};

  // ---------------------------------------------------------------- small DOM helpers
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") el.className = v;
      else if (k === "text") el.textContent = v;
      else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children) if (c !== null && c !== undefined) el.append(c);
    return el;
  }

  function changed(el) {
    el.dispatchEvent(new Event("schema-change", { bubbles: true }));
  }

  function typeOf(schema) {
    let t = schema.type;
    if (Array.isArray(t)) t = t.find((x) => x !== "null") || t[0];
    if (!t && schema.properties) t = "object";
    if (!t && schema.enum) t = "enum";
    return t;
  }

  function isObject(v) {
    return v !== null && typeof v === "object" && !Array.isArray(v);
  }

  function joinPath(path, key) {
    return path === "" ? String(key) : path + "." + key;
  }

  function describe(v) {
    return typeof v === "string" ? JSON.stringify(v) : JSON.stringify(v);
  }

  let uid = 0;
  function nextId() {
    uid += 1;
    return "sc-" + uid;
  }

  // A labelled field wrapper: label, control, description, error list.
  function wrap(schema, path, label, required, control, controlId) {
    const title = schema.title || label;
    const labelEl = label === null ? null : h("label", { for: controlId, class: required ? "required" : null, text: title });
    const help = helpText(schema, required);
    return h("div", { class: "sc-field", "data-path": path },
      labelEl,
      h("div", { class: "sc-control" }, control),
      h("ul", { class: "errorlist sc-errors" }),
      help.length ? h("div", { class: "sc-help", text: help.join(" ") }) : null);
  }

  function helpText(schema, required) {
    const help = [];
    if (schema.description) help.push(schema.description);
    if (!required && schema.default !== undefined) help.push("Default: " + describe(schema.default) + ".");
    return help;
  }

  // Optional arrays and maps: "not set" (the transform's default applies) is distinct from an
  // explicitly empty value, so they get an explicit set / reset-to-default switch.
  function optionalSwitch(schema, required, initiallySet, onSet, onReset) {
    const state = { isSet: required || initiallySet };
    const note = h("span", { class: "sc-unset-note", text: "Not set" + (schema.default !== undefined ? " (default " + describe(schema.default) + ")" : "") + "." });
    const setBtn = h("button", { type: "button", class: "sc-link sc-set", text: "set a value" });
    const resetBtn = h("button", { type: "button", class: "sc-link sc-reset", text: "reset to default" });
    const el = h("div", { class: "sc-switch" }, note, " ", setBtn, resetBtn);
    state.paint = (body) => {
      body.hidden = !state.isSet;
      note.hidden = setBtn.hidden = state.isSet;
      resetBtn.hidden = required || !state.isSet;
      el.hidden = required;
    };
    setBtn.addEventListener("click", () => { state.isSet = true; onSet(); changed(el); });
    resetBtn.addEventListener("click", () => { state.isSet = false; onReset(); changed(el); });
    state.el = el;
    return state;
  }

  function problems(schema, value, path, required) {
    // Client-side checks: required, enum, minLength, minimum/maximum, integrality, minItems.
    const out = [];
    if (value === UNSET) {
      if (required) out.push([path, "This field is required."]);
      return out;
    }
    if (schema.enum && !schema.enum.some((e) => JSON.stringify(e) === JSON.stringify(value))) {
      out.push([path, "Must be one of " + schema.enum.map(describe).join(", ") + "."]);
    }
    const t = typeOf(schema);
    if (typeof value === "string" && schema.minLength && value.length < schema.minLength) {
      out.push([path, schema.minLength === 1 ? "Must not be empty." : "At least " + schema.minLength + " characters."]);
    }
    if (typeof value === "number") {
      if (t === "integer" && !Number.isInteger(value)) out.push([path, "Must be a whole number."]);
      if (schema.minimum !== undefined && value < schema.minimum) out.push([path, "Must be at least " + schema.minimum + "."]);
      if (schema.maximum !== undefined && value > schema.maximum) out.push([path, "Must be at most " + schema.maximum + "."]);
    }
    if ((t === "integer" || t === "number") && typeof value === "string") out.push([path, "Must be a number."]);
    if (Array.isArray(value) && schema.minItems && value.length < schema.minItems) {
      out.push([path, "At least " + schema.minItems + " item(s)."]);
    }
    return out;
  }

  // ---------------------------------------------------------------- editors
  // An editor is {el, get() -> value | UNSET, check() -> [[path, message]]}.

  function buildEditor(schema, value, path, required, label) {
    schema = schema || {};
    const t = typeOf(schema);
    if (schema.enum) return enumEditor(schema, value, path, required, label);
    if (t === "boolean") return booleanEditor(schema, value, path, required, label);
    if (t === "integer" || t === "number") return numberEditor(schema, value, path, required, label);
    if (t === "string") return stringEditor(schema, value, path, required, label);
    if (t === "array") {
      const items = schema.items || {};
      const it = typeOf(items);
      if (it === "object") return arrayEditor(schema, value, path, required, label, true);
      if (items.enum || ["string", "integer", "number", "boolean"].includes(it)) {
        return arrayEditor(schema, value, path, required, label, false);
      }
      return jsonEditor(schema, value, path, required, label);
    }
    if (t === "object") {
      if (schema.properties && Object.keys(schema.properties).length) {
        return objectEditor(schema, value, path, required, label, false);
      }
      return mapEditor(schema, value, path, required, label);
    }
    return jsonEditor(schema, value, path, required, label);
  }

  function initial(schema, value, required) {
    // A required field with nothing stored starts from its default; optional ones stay unset.
    if (value !== UNSET) return value;
    if (required && schema.default !== undefined) return schema.default;
    return UNSET;
  }

  function enumEditor(schema, value, path, required, label) {
    const id = nextId();
    value = initial(schema, value, required);
    const select = h("select", { id: id, name: id, class: "sc-input" });
    if (!required || value === UNSET) {
      const unsetLabel = schema.default !== undefined ? "(not set: default " + describe(schema.default) + ")" : "(not set)";
      select.append(h("option", { value: "", text: unsetLabel }));
    }
    const known = schema.enum.map((e) => JSON.stringify(e));
    for (const e of schema.enum) select.append(h("option", { value: JSON.stringify(e), text: typeof e === "string" ? e : JSON.stringify(e) }));
    if (value !== UNSET && !known.includes(JSON.stringify(value))) {
      select.append(h("option", { value: JSON.stringify(value), text: describe(value) + " (not allowed)" }));
    }
    select.value = value === UNSET ? "" : JSON.stringify(value);
    const get = () => (select.value === "" ? UNSET : JSON.parse(select.value));
    return { el: wrap(schema, path, label, required, select, id), get, check: () => problems(schema, get(), path, required) };
  }

  function booleanEditor(schema, value, path, required, label) {
    const id = nextId();
    value = initial(schema, value, required);
    let isSet = value !== UNSET;
    const box = h("input", { type: "checkbox", id: id, class: "sc-input" });
    const fallback = schema.default === true;
    box.checked = isSet ? value === true : fallback;
    const state = h("span", { class: "sc-unset-note" });
    const reset = h("button", { type: "button", class: "sc-link", text: "reset to default" });
    function paint() {
      state.textContent = isSet ? "" : "not set";
      reset.hidden = required || !isSet;
      box.indeterminate = !isSet && schema.default === undefined;
    }
    box.addEventListener("change", () => { isSet = true; paint(); });
    reset.addEventListener("click", () => { isSet = false; box.checked = fallback; paint(); changed(box); });
    paint();
    const control = h("span", { class: "sc-bool" }, box, " ", state, " ", reset);
    const get = () => (isSet || required ? box.checked : UNSET);
    const el = wrap(schema, path, label, required, control, id);
    el.classList.add("sc-checkbox");
    return { el, get, check: () => problems(schema, get(), path, required) };
  }

  function numberEditor(schema, value, path, required, label) {
    const id = nextId();
    value = initial(schema, value, required);
    const integer = typeOf(schema) === "integer";
    const input = h("input", {
      type: "number", id: id, class: "sc-input vIntegerField",
      step: integer ? "1" : "any",
      min: schema.minimum !== undefined ? String(schema.minimum) : null,
      max: schema.maximum !== undefined ? String(schema.maximum) : null,
      placeholder: schema.default !== undefined ? String(schema.default) : null,
    });
    let raw = null; // a stored value that is not a number is shown, not silently dropped
    if (value !== UNSET) {
      if (typeof value === "number") input.value = String(value);
      else raw = value;
    }
    if (raw !== null) input.placeholder = "stored: " + JSON.stringify(raw);
    input.addEventListener("input", () => { raw = null; });
    const get = () => {
      if (input.value === "") {
        if (raw !== null) return raw;
        return input.validity && input.validity.badInput ? "" : UNSET;
      }
      return Number(input.value);
    };
    return { el: wrap(schema, path, label, required, input, id), get, check: () => problems(schema, get(), path, required) };
  }

  function stringEditor(schema, value, path, required, label) {
    const id = nextId();
    value = initial(schema, value, required);
    const multiline = schema.format === "multiline";
    const attrs = { id: id, class: "sc-input" + (multiline ? " vLargeTextField" : " vTextField") };
    if (schema.maxLength) attrs.maxlength = String(schema.maxLength);
    if (schema.default !== undefined && schema.default !== "" && !required) attrs.placeholder = String(schema.default);
    const input = multiline ? h("textarea", Object.assign(attrs, { rows: "4", cols: "60" })) : h("input", Object.assign(attrs, { type: "text" }));
    if (value !== UNSET) input.value = typeof value === "string" ? value : JSON.stringify(value);
    const get = () => (input.value === "" && !required ? UNSET : input.value);
    return { el: wrap(schema, path, label, required, input, id), get, check: () => problems(schema, get(), path, required) };
  }

  function objectEditor(schema, value, path, required, label, top) {
    const original = isObject(value) ? value : {};
    const props = schema.properties || {};
    const req = new Set(schema.required || []);
    const children = [];
    const body = h("div", { class: "sc-object-body" });
    for (const [key, sub] of Object.entries(props)) {
      const ed = buildEditor(sub, Object.prototype.hasOwnProperty.call(original, key) ? original[key] : UNSET, joinPath(path, key), req.has(key), key);
      children.push([key, ed]);
      body.append(ed.el);
    }
    const extraKeys = Object.keys(original).filter((k) => !(k in props));
    if (extraKeys.length) {
      body.append(h("div", { class: "sc-help sc-preserved", text: "Kept as stored (not described by the schema): " + extraKeys.join(", ") + "." }));
    }
    const get = () => {
      const out = {};
      for (const [key, ed] of children) {
        const v = ed.get();
        if (v !== UNSET) out[key] = v;
      }
      for (const k of extraKeys) out[k] = original[k];
      if (!top && !required && !isObject(value) && Object.keys(out).length === 0) return UNSET;
      return out;
    };
    const check = () => {
      const out = [];
      for (const [, ed] of children) out.push(...ed.check());
      if (required && get() === UNSET) out.push([path, "This field is required."]);
      return out;
    };
    let el;
    if (top) {
      el = h("div", { class: "sc-object sc-top", "data-path": "" }, h("ul", { class: "errorlist sc-errors" }), body);
    } else {
      el = h("fieldset", { class: "sc-object sc-field", "data-path": path },
        h("legend", { class: required ? "required" : null, text: schema.title || label }),
        schema.description ? h("div", { class: "sc-help", text: schema.description }) : null,
        h("ul", { class: "errorlist sc-errors" }), body);
    }
    return { el, get, check };
  }

  function arrayEditor(schema, value, path, required, label, ofObjects) {
    const items = schema.items || {};
    let values = Array.isArray(value) ? value.slice() : (required && Array.isArray(schema.default) ? schema.default.slice() : []);
    let editors = [];
    const list = h("div", { class: "sc-rows" });
    const addBtn = h("button", { type: "button", class: "sc-add", text: ofObjects ? "Add item" : "Add row" });
    const body = h("div", { class: "sc-array-body" }, list, addBtn);
    const sw = optionalSwitch(schema, required, Array.isArray(value),
      () => { values = Array.isArray(schema.default) ? schema.default.slice() : []; render(); sw.paint(body); },
      () => { values = []; render(); sw.paint(body); });
    const help = helpText(schema, required);
    const el = h("fieldset", { class: "sc-field sc-array", "data-path": path },
      h("legend", { class: required ? "required" : null, text: schema.title || label }),
      help.length ? h("div", { class: "sc-help", text: help.join(" ") }) : null,
      h("ul", { class: "errorlist sc-errors" }), sw.el, body);

    function collect() {
      return editors.map((ed) => ed.get());
    }
    function render() {
      list.textContent = "";
      editors = values.map((v, i) => {
        const itemPath = joinPath(path, i);
        const ed = ofObjects
          ? objectEditor(items, v === UNSET ? {} : v, itemPath, true, "#" + (i + 1), false)
          : buildEditor(items, v, itemPath, false, null); // an emptied row is simply dropped
        const remove = h("button", { type: "button", class: "sc-remove", title: "Remove", "aria-label": "Remove item " + (i + 1), text: "×" });
        remove.addEventListener("click", () => { values = collect(); values.splice(i, 1); render(); changed(list); });
        list.append(h("div", { class: "sc-row" + (ofObjects ? " sc-row-object" : "") }, ed.el, remove));
        return ed;
      });
    }
    addBtn.addEventListener("click", () => {
      values = collect();
      values.push(ofObjects ? {} : UNSET);
      render();
      const first = list.lastElementChild && list.lastElementChild.querySelector("input, select, textarea");
      if (first) first.focus();
      changed(list);
    });
    render();
    sw.paint(body);
    const get = () => (sw.isSet ? collect().filter((v) => v !== UNSET) : UNSET);
    const check = () => {
      const out = [];
      for (const ed of editors) out.push(...ed.check().filter(([, m]) => m !== "This field is required."));
      out.push(...problems(schema, get(), path, required));
      return out;
    };
    return { el, get, check };
  }

  function mapEditor(schema, value, path, required, label) {
    const valueSchema = isObject(schema.additionalProperties) ? schema.additionalProperties : null;
    let rows = isObject(value) ? Object.entries(value) : [];
    let editors = [];
    const list = h("div", { class: "sc-rows" });
    const addBtn = h("button", { type: "button", class: "sc-add", text: "Add entry" });
    const body = h("div", { class: "sc-map-body" }, list, addBtn);
    const sw = optionalSwitch(schema, required, isObject(value),
      () => { rows = isObject(schema.default) ? Object.entries(schema.default) : []; render(); sw.paint(body); },
      () => { rows = []; render(); sw.paint(body); });
    const help = helpText(schema, required);
    const el = h("fieldset", { class: "sc-field sc-map", "data-path": path },
      h("legend", { class: required ? "required" : null, text: schema.title || label }),
      help.length ? h("div", { class: "sc-help", text: help.join(" ") }) : null,
      h("ul", { class: "errorlist sc-errors" }), sw.el, body);

    function collect() {
      return editors.map(([keyInput, ed]) => [keyInput.value, ed.get()]);
    }
    function render() {
      list.textContent = "";
      editors = rows.map(([k, v], i) => {
        const keyInput = h("input", { type: "text", class: "sc-key", placeholder: "key", "aria-label": "Key", value: k });
        const ed = valueSchema && typeOf(valueSchema) !== "object" && typeOf(valueSchema) !== "array"
          ? buildEditor(valueSchema, v, joinPath(path, k || "?"), true, null)
          : jsonEditor({}, v, joinPath(path, k || "?"), true, null);
        const remove = h("button", { type: "button", class: "sc-remove", title: "Remove", "aria-label": "Remove entry", text: "×" });
        remove.addEventListener("click", () => { rows = collect(); rows.splice(i, 1); render(); changed(list); });
        keyInput.addEventListener("change", () => { ed.el.dataset.path = joinPath(path, keyInput.value || "?"); });
        list.append(h("div", { class: "sc-row sc-kv" }, keyInput, ed.el, remove));
        return [keyInput, ed];
      });
    }
    addBtn.addEventListener("click", () => { rows = collect(); rows.push(["", UNSET]); render(); changed(list); });
    render();
    sw.paint(body);
    const get = () => {
      if (!sw.isSet) return UNSET;
      const out = {};
      for (const [k, v] of collect()) if (k !== "" && v !== UNSET) out[k] = v;
      return out;
    };
    const check = () => {
      const out = problems(schema, get(), path, required);
      const seen = new Set();
      for (const [k] of collect()) {
        if (k !== "" && seen.has(k)) out.push([path, "Key " + JSON.stringify(k) + " appears twice; the last one wins."]);
        seen.add(k);
      }
      for (const [, ed] of editors) out.push(...ed.check());
      return out;
    };
    return { el, get, check };
  }

  function jsonEditor(schema, value, path, required, label) {
    // Typed JSON value: string, number, boolean, null or raw JSON.
    const id = nextId();
    value = initial(schema, value, required);
    const kind = h("select", { class: "sc-json-kind", "aria-label": "Value type" },
      ...["string", "number", "boolean", "null", "json"].map((k) => h("option", { value: k, text: k })));
    const text = h("input", { type: "text", id: id, class: "sc-input" });
    const area = h("textarea", { class: "sc-input vLargeTextField", rows: "3", cols: "50", "aria-label": "JSON value" });
    const bool = h("select", { class: "sc-input", "aria-label": "Boolean value" }, h("option", { value: "true", text: "true" }), h("option", { value: "false", text: "false" }));
    if (value === UNSET) { kind.value = "string"; }
    else if (typeof value === "string") { kind.value = "string"; text.value = value; }
    else if (typeof value === "number") { kind.value = "number"; text.value = String(value); }
    else if (typeof value === "boolean") { kind.value = "boolean"; bool.value = String(value); }
    else if (value === null) { kind.value = "null"; }
    else { kind.value = "json"; area.value = JSON.stringify(value, null, 2); }
    function paint() {
      text.hidden = !(kind.value === "string" || kind.value === "number");
      area.hidden = kind.value !== "json";
      bool.hidden = kind.value !== "boolean";
    }
    kind.addEventListener("change", paint);
    paint();
    let bad = null;
    const get = () => {
      bad = null;
      switch (kind.value) {
        case "string": return text.value === "" && !required ? UNSET : text.value;
        case "number": {
          if (text.value.trim() === "") return UNSET;
          const n = Number(text.value);
          if (Number.isNaN(n)) { bad = "Not a number."; return text.value; }
          return n;
        }
        case "boolean": return bool.value === "true";
        case "null": return null;
        default:
          if (area.value.trim() === "") return UNSET;
          try { return JSON.parse(area.value); } catch (e) { bad = "Not valid JSON."; return area.value; }
      }
    };
    const check = () => {
      const v = get();
      return bad ? [[path, bad]] : problems(schema, v, path, required);
    };
    const control = h("span", { class: "sc-json" }, kind, " ", text, area, bool);
    return { el: wrap(schema, path, label, required, control, id), get, check };
  }

  // ---------------------------------------------------------------- errors
  function fieldFor(root, path) {
    for (const el of root.querySelectorAll("[data-path]")) if (el.dataset.path === path) return el;
    return null;
  }

  function placeError(root, message, kind) {
    // "a.b.0: message" -> the field with that path; "'x' is a required property" -> field x.
    let path = "";
    let text = message;
    let cut = message.indexOf(": ");
    while (cut > 0) {
      const candidate = message.slice(0, cut);
      if (/^[\w.\-]+$/.test(candidate) && fieldFor(root, candidate)) { path = candidate; text = message.slice(cut + 2); break; }
      cut = message.indexOf(": ", cut + 1);
    }
    const missing = /^'([^']+)' is a required property$/.exec(text);
    if (missing && fieldFor(root, joinPath(path, missing[1]))) {
      path = joinPath(path, missing[1]);
      text = "This field is required.";
    }
    let target = fieldFor(root, path);
    while (!target && path.includes(".")) {
      path = path.slice(0, path.lastIndexOf("."));
      target = fieldFor(root, path);
    }
    target = target || fieldFor(root, "") || root;
    const list = target.querySelector(":scope > .sc-errors") || target.appendChild(h("ul", { class: "errorlist sc-errors" }));
    list.append(h("li", { class: kind, text: text }));
    target.classList.add("sc-has-error");
  }

  function clearErrors(root, kind) {
    for (const li of root.querySelectorAll(".sc-errors > li." + kind)) li.remove();
    for (const el of root.querySelectorAll(".sc-has-error")) {
      if (!el.querySelector(":scope > .sc-errors > li")) el.classList.remove("sc-has-error");
    }
  }

  // ---------------------------------------------------------------- worked examples
  // The transform's declared examples (wire JSON in the named protocol): input -> output, so an
  // operator sees what a rule does before saving it. Only the keys the rule touches are shown
  // on the output side (that is what the example promises; other keys pass through).
  function pretty(v) {
    return JSON.stringify(v, null, 2);
  }

  function examplesBlock(examples, zh) {
    const details = h("details", { class: "tx-examples" },
      h("summary", { text: (zh ? "示例" : "Worked examples") + " (" + examples.length + ")" }));
    for (const ex of examples) {
      const output = Object.assign({}, ex.expected);
      const absent = (ex.absent || []).map((k) => k + ": " + (zh ? "（已移除）" : "(removed)"));
      const meta = [ex.phase + " phase", ex.protocol];
      const config = ex.config && Object.keys(ex.config).length ? pretty(ex.config) : (zh ? "{}（默认）" : "{} (defaults)");
      details.append(h("div", { class: "tx-example" },
        h("div", { class: "tx-example-title", text: ex.title + " — " + meta.join(", ") }),
        h("div", { class: "tx-example-config" }, h("span", { text: "config: " }), h("code", { text: config })),
        h("div", { class: "tx-example-io" },
          h("div", {}, h("div", { class: "tx-label", text: zh ? "输入" : "input" }), h("pre", { class: "tx-in", text: pretty(ex.input) })),
          h("div", { class: "tx-arrow", text: "→" }),
          h("div", {}, h("div", { class: "tx-label", text: zh ? "输出（本示例检查的字段，其余原样传递）" : "output (the keys this example checks; others pass through)" }),
            h("pre", { class: "tx-out", text: pretty(output) + (absent.length ? "\n" + absent.join("\n") : "") }))),
        ex.note ? h("div", { class: "tx-note help", text: (zh && ex.note.zh) || ex.note.en }) : null));
    }
    return details;
  }

  // ---------------------------------------------------------------- one rule
  function registryFor(container) {
    const id = container.dataset.registryId;
    if (!(id in registries)) {
      const script = document.getElementById(id);
      registries[id] = script ? JSON.parse(script.textContent) : {};
    }
    return registries[id];
  }

  function ruleRoot(container) {
    return container.closest(".inline-related") || container.closest("form") || document;
  }

  function initConfig(container) {
    if (container.dataset.ready || container.closest(".empty-form")) return;
    container.dataset.ready = "1";
    const root = ruleRoot(container);
    const hidden = container.querySelector("input[type=hidden]");
    const formEl = container.querySelector(".schema-config-form");
    const picker = root.querySelector("select.transform-picker");
    const phase = root.querySelector("select[name$='phase']");
    const enabled = root.querySelector("input[type=checkbox][name$='enabled']");
    const registry = registryFor(container);
    let editor = null;

    const descEl = h("div", { class: "transform-description help" });
    const examplesEl = h("div", { class: "transform-examples" });
    if (picker) (picker.closest(".flex-container") || picker).after(descEl, examplesEl);

    function entry() {
      return picker ? registry[picker.value] : undefined;
    }

    // Examples start open while an operator picks a transform, collapsed on stored rules.
    function describeTransform(openExamples) {
      const e = entry();
      examplesEl.textContent = "";
      if (!e) { descEl.textContent = ""; return; }
      const zh = (document.documentElement.lang || "").toLowerCase().startsWith("zh");
      descEl.textContent = (zh && e.description.zh) || e.description.en;
      descEl.title = zh ? e.description.en : e.description.zh || "";
      const examples = e.examples || [];
      if (examples.length) {
        const block = examplesBlock(examples, zh);
        block.open = Boolean(openExamples);
        examplesEl.append(block);
      }
    }

    function fitPhases() {
      const e = entry();
      if (!phase || !e) return;
      for (const opt of phase.options) opt.disabled = opt.value !== "" && !e.phases.includes(opt.value);
      if (!e.phases.includes(phase.value)) phase.value = e.phases[0];
    }

    function sync() {
      if (!editor) return;
      const v = editor.get();
      hidden.value = JSON.stringify(v === UNSET ? {} : v);
      clearErrors(formEl, "client");
      for (const [path, message] of editor.check()) placeError(formEl, (path ? path + ": " : "") + message, "client");
    }

    function build(value) {
      formEl.textContent = "";
      editor = null;
      const e = entry();
      if (!picker || !picker.value) {
        formEl.append(h("p", { class: "sc-note", text: "Choose a transform to configure it." }));
        return;
      }
      if (!e) {
        const opt = picker.selectedOptions[0];
        const broken = opt && opt.dataset.broken;
        formEl.append(h("p", { class: broken ? "sc-note sc-broken" : "sc-note",
                               text: broken ? "Broken rule: this transform is " + broken + ". Install its package or delete the rule; its stored config is shown read-only."
                                            : "Unknown or unavailable transform; its stored config is shown read-only." }),
          h("pre", { class: "sc-readonly", text: JSON.stringify(value, null, 2) }));
        return;
      }
      const schema = e.schema || {};
      if (typeOf(schema) !== "object" || !isObject(value)) {
        editor = buildEditor(schema, value, "", true, "Config");
      } else {
        editor = objectEditor(schema, value, "", true, "Config", true);
      }
      formEl.append(editor.el);
      if (!Object.keys(schema.properties || {}).length && typeOf(schema) === "object" && schema.additionalProperties === false) {
        formEl.append(h("p", { class: "sc-note", text: "This transform has no options." }));
      }
      sync();
      clearErrors(formEl, "client");
    }

    let stored = {};
    try {
      stored = hidden.value ? JSON.parse(hidden.value) : {};
    } catch (err) {
      stored = {};
    }
    describeTransform(!picker || !picker.value);
    fitPhases();
    build(stored);
    if (hidden.value && stored && Object.keys(stored).length === 0 && hidden.value.trim() !== "{}") {
      formEl.prepend(h("p", { class: "sc-note", text: "The submitted config was not valid JSON; the form starts empty." }));
    }

    // Server errors: next to their fields; Django's own list for the config row is then redundant.
    const serverErrors = JSON.parse(container.dataset.errors || "[]");
    if (serverErrors.length) {
      for (const message of serverErrors) placeError(formEl, message, "server");
      const row = container.closest(".form-row, td");
      if (row) for (const ul of row.querySelectorAll(":scope > ul.errorlist, :scope > div > ul.errorlist")) ul.hidden = true;
    }

    formEl.addEventListener("input", (ev) => {
      const field = ev.target.closest(".sc-field");
      if (field) clearErrors(field, "server");
      sync();
    });
    formEl.addEventListener("change", sync);
    formEl.addEventListener("schema-change", sync);
    if (picker) {
      picker.addEventListener("change", () => {
        describeTransform(true);
        fitPhases();
        build({}); // another transform's options never carry over
      });
    }
    if (enabled) {
      const paint = () => root.classList.toggle("rule-disabled", !enabled.checked);
      enabled.addEventListener("change", paint);
      paint();
    }
    const form = container.closest("form");
    if (form) form.addEventListener("submit", sync);
  }

  // ---------------------------------------------------------------- chain ordering
  function rows(chain) {
    return Array.from(chain.querySelectorAll(".inline-related")).filter((r) => !r.classList.contains("empty-form") && r.id && !r.id.endsWith("-empty"));
  }

  function inUse(row) {
    const pk = row.querySelector("input[type=hidden][name$='-id']");
    const picker = row.querySelector("select.transform-picker");
    return (pk && pk.value) || (picker && picker.value);
  }

  function addMoveButtons(chain, row) {
    if (row.querySelector(".rule-move")) return;
    const heading = row.querySelector("h3");
    if (!heading) return;
    const up = h("button", { type: "button", class: "rule-move rule-up", title: "Move up", "aria-label": "Move rule up", text: "↑" });
    const down = h("button", { type: "button", class: "rule-move rule-down", title: "Move down", "aria-label": "Move rule down", text: "↓" });
    up.addEventListener("click", () => move(chain, row, -1));
    down.addEventListener("click", () => move(chain, row, 1));
    heading.prepend(h("span", { class: "rule-order" }, up, down));
    const positionRow = row.querySelector(".field-position");
    if (positionRow) positionRow.classList.add("rule-position-hidden");
  }

  function move(chain, row, step) {
    const list = rows(chain);
    const i = list.indexOf(row);
    const j = i + step;
    if (j < 0 || j >= list.length) return;
    if (step < 0) list[j].before(row);
    else list[j].after(row);
    chain.dataset.reordered = "1";
    renumber(chain);
    const btn = row.querySelector(step < 0 ? ".rule-up" : ".rule-down");
    if (btn) btn.focus();
  }

  function renumber(chain) {
    // Positions follow the on-screen order; untouched blank rows keep theirs so they stay "unchanged".
    let n = 0;
    for (const row of rows(chain)) {
      const pos = row.querySelector("input[name$='-position']");
      if (!pos) continue;
      if (inUse(row)) { pos.value = String(n); n += 1; }
    }
  }

  function initChain(chain) {
    if (chain.dataset.ready) return;
    chain.dataset.ready = "1";
    // A form re-shown after a validation error lists rows in submission order; show them in
    // position order (what was on screen when saving). Blank rows go last.
    const list = rows(chain);
    const key = (r) => { const p = r.querySelector("input[name$='-position']"); return inUse(r) && p ? Number(p.value) || 0 : Infinity; };
    const sorted = list.slice().sort((a, b) => key(a) - key(b));
    if (sorted.some((r, i) => r !== list[i])) {
      const anchor = chain.querySelector(".inline-related.empty-form");
      for (const row of sorted) {
        if (anchor) anchor.before(row);
        else list[list.length - 1].parentNode.append(row);
      }
    }
    for (const row of rows(chain)) addMoveButtons(chain, row);
    const form = chain.closest("form");
    if (form) {
      form.addEventListener("submit", () => {
        const list = rows(chain);
        const fresh = list.filter((r) => { const pk = r.querySelector("input[type=hidden][name$='-id']"); return !(pk && pk.value) && inUse(r); });
        if (chain.dataset.reordered || fresh.length) renumber(chain);
      });
    }
  }

  // ---------------------------------------------------------------- wiring
  function initAll(scope) {
    for (const chain of (scope || document).querySelectorAll(".transform-chain")) initChain(chain);
    for (const c of (scope || document).querySelectorAll(".schema-config")) initConfig(c);
  }

  document.addEventListener("DOMContentLoaded", () => initAll(document));
  document.addEventListener("formset:added", (ev) => {
    const row = ev.target;
    const chain = row.closest(".transform-chain");
    if (chain) addMoveButtons(chain, row);
    for (const c of row.querySelectorAll(".schema-config")) initConfig(c);
  });
  window.TransformRuleForm = { initAll: initAll };
})();
