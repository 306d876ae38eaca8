// Builds an HTML form from a JSON Schema and reads/writes plain JSON values through it.
// Supported: string (incl. date, long text), number, integer, boolean, enum, const,
// nested object, array, binary (file picker, base64). Anything else gets a JSON box.

import { h } from "./render.js";

export class FormError extends Error {}

let seq = 0;
const nextId = () => `f${(seq += 1)}`;

function nonNull(list) {
  return list.filter((s) => s && !(s.type === "null" || (Array.isArray(s.type) && s.type.length === 1 && s.type[0] === "null")));
}

// Unwraps Optional[X] (anyOf/oneOf with null), single-item allOf and type lists.
function normalise(schema) {
  let s = schema && typeof schema === "object" ? schema : {};
  for (const key of ["anyOf", "oneOf"]) {
    if (Array.isArray(s[key])) {
      const rest = nonNull(s[key]);
      if (rest.length === 1) {
        const { [key]: _drop, ...outer } = s;
        s = { ...rest[0], ...outer, nullable: rest.length < s[key].length };
      }
    }
  }
  if (Array.isArray(s.allOf) && s.allOf.length === 1) {
    const { allOf, ...outer } = s;
    s = { ...allOf[0], ...outer };
  }
  if (Array.isArray(s.type)) {
    const types = s.type.filter((t) => t !== "null");
    s = { ...s, type: types.length === 1 ? types[0] : undefined, nullable: types.length < s.type.length };
  }
  return s;
}

export function isBinary(s) {
  return s.type === "string" && (s.format === "binary" || s.format === "byte"
    || s.contentEncoding === "base64" || typeof s.contentMediaType === "string");
}

function labelFor(ctx, s, id) {
  return h("label", { for: id, class: "field-label" },
    h("span", { class: "field-name" }, ctx.name),
    ctx.required ? h("span", { class: "req", title: "required", "aria-hidden": "true" }, "*") : null,
    typeof s.title === "string" && s.title.toLowerCase().replace(/\s+/g, "_") !== ctx.name.toLowerCase()
      ? h("span", { class: "muted small" }, ` ${s.title}`) : null);
}

function fieldRow(ctx, s, id, control, type) {
  return h("div", { class: `field field-${type}` },
    labelFor(ctx, s, id),
    control,
    s.description ? h("div", { class: "help" }, s.description) : null);
}

function stringNode(s, ctx) {
  const id = nextId();
  const long = (s.maxLength || 0) > 200 || ["textarea", "multiline"].includes(s.format);
  // As an attribute: the maxLength property throws past 2^31 - 1, an attribute the
  // browser cannot read is ignored.
  const maxlength = s.maxLength ?? null;
  const input = long ? h("textarea", { id, rows: 4, maxlength }) : h("input", { id, type: s.format === "date" ? "date" : "text", maxlength });
  input.dataset.path = ctx.path;
  if (s.format === "date-time") input.placeholder = "2025-01-31T12:00:00Z";
  else if (s.examples && s.examples.length) input.placeholder = String(s.examples[0]);
  const set = (v) => { input.value = v === undefined || v === null ? (typeof s.default === "string" ? s.default : "") : String(v); };
  set(undefined);
  return {
    el: fieldRow(ctx, s, id, input, "string"),
    get: () => (input.value === "" && !ctx.required ? undefined : input.value),
    set,
  };
}

function numberNode(s, ctx) {
  const id = nextId();
  const input = h("input", { id, type: "number", step: s.type === "integer" ? "1" : "any", inputmode: "decimal" });
  input.dataset.path = ctx.path;
  if (typeof s.minimum === "number") input.min = String(s.minimum);
  if (typeof s.maximum === "number") input.max = String(s.maximum);
  const set = (v) => { input.value = v === undefined || v === null ? (typeof s.default === "number" ? String(s.default) : "") : String(v); };
  set(undefined);
  return {
    el: fieldRow(ctx, s, id, input, "number"),
    get: () => (input.value === "" ? undefined : Number(input.value)),
    set,
  };
}

function booleanNode(s, ctx) {
  const id = nextId();
  const input = h("input", { id, type: "checkbox" });
  input.dataset.path = ctx.path;
  // An optional boolean without default is only sent once the person touched it.
  let touched = false;
  input.addEventListener("change", () => { touched = true; });
  const set = (v) => {
    touched = v !== undefined && v !== null;
    input.checked = touched ? Boolean(v) : s.default === true;
  };
  set(undefined);
  return {
    el: fieldRow(ctx, s, id, input, "boolean"),
    get: () => (touched || ctx.required || typeof s.default === "boolean" ? input.checked : undefined),
    set,
  };
}

function enumNode(s, ctx) {
  const id = nextId();
  const values = s.const !== undefined ? [s.const] : s.enum;
  const select = h("select", { id });
  select.dataset.path = ctx.path;
  if (!ctx.required || s.default === undefined) select.append(h("option", { value: "" }, "—"));
  values.forEach((v, i) => select.append(h("option", { value: String(i) }, typeof v === "string" ? v : JSON.stringify(v))));
  const indexOf = (v) => values.findIndex((x) => JSON.stringify(x) === JSON.stringify(v));
  const set = (v) => {
    const i = indexOf(v === undefined || v === null ? s.default : v);
    select.value = i >= 0 ? String(i) : "";
  };
  set(undefined);
  return {
    el: fieldRow(ctx, s, id, select, "enum"),
    get: () => (select.value === "" ? undefined : values[Number(select.value)]),
    set,
  };
}

function fileNode(s, ctx) {
  const id = nextId();
  const input = h("input", { id, type: "file" });
  input.dataset.path = ctx.path;
  const info = h("span", { class: "muted small" });
  let value;
  input.addEventListener("change", () => {
    const file = input.files && input.files[0];
    value = undefined;
    info.textContent = "";
    if (!file) return;
    const reader = new FileReader();
    reader.onload = () => {
      value = String(reader.result).replace(/^data:[^,]*,/, "");
      ctx.files.set(ctx.path, { name: file.name, type: file.type || "application/octet-stream" });
      info.textContent = `${file.name}, ${file.size} bytes`;
      input.dispatchEvent(new CustomEvent("file-ready", { bubbles: true }));
    };
    reader.onerror = () => { info.textContent = `could not read ${file.name}`; };
    reader.readAsDataURL(file);
  });
  const set = (v) => {
    input.value = "";
    ctx.files.delete(ctx.path);
    value = typeof v === "string" ? v : undefined;
    info.textContent = value ? `preset value, ${value.length} base64 characters` : "";
  };
  return {
    el: fieldRow(ctx, s, id, h("div", { class: "row" }, input, info), "file"),
    get: () => value,
    set,
  };
}

function jsonNode(s, ctx) {
  const id = nextId();
  const area = h("textarea", { id, rows: 3, class: "mono", placeholder: "JSON value" });
  area.dataset.path = ctx.path;
  const set = (v) => { area.value = v === undefined ? (s.default !== undefined ? JSON.stringify(s.default, null, 2) : "") : JSON.stringify(v, null, 2); };
  set(undefined);
  return {
    el: fieldRow(ctx, s, id, area, "json"),
    get: () => {
      if (area.value.trim() === "") return undefined;
      try {
        return JSON.parse(area.value);
      } catch (exc) {
        throw new FormError(`${ctx.path || "value"}: not valid JSON (${exc.message})`);
      }
    },
    set,
  };
}

function objectNode(s, ctx) {
  const props = s.properties || {};
  const required = new Set(s.required || []);
  // Property order does not survive the card's protobuf Struct, but `required` is a list:
  // required fields first, in their declared order, then the optional ones.
  const requiredOrder = (s.required || []).filter((k) => k in props);
  const ordered = [...requiredOrder, ...Object.keys(props).filter((k) => !required.has(k))];
  const children = ordered.map((key) => [key, props[key]]).map(([key, sub]) => [key, build(sub, {
    name: key, required: required.has(key), path: ctx.path ? `${ctx.path}.${key}` : key, files: ctx.files,
  })]);
  // Keys set through raw JSON or examples that the schema does not list are kept, not lost.
  let extras = {};
  const body = children.map(([, node]) => node.el);
  const el = ctx.root
    ? h("div", { class: "object-root" }, body)
    : h("fieldset", { class: "field field-object", dataset: { path: ctx.path } },
      h("legend", {}, ctx.name, ctx.required ? h("span", { class: "req", "aria-hidden": "true" }, "*") : null),
      s.description ? h("div", { class: "help" }, s.description) : null, body);
  return {
    el,
    get: () => {
      // Built from entries, so every key is an own property: `out["__proto__"] = v` would
      // set the prototype instead (or, for a string, do nothing) and drop the field.
      const values = children.map(([key, node]) => [key, node.get()]).filter(([, v]) => v !== undefined);
      const out = Object.fromEntries([...Object.entries(extras), ...values]);
      return Object.keys(out).length || ctx.required || ctx.root ? out : undefined;
    },
    set: (v) => {
      const obj = v && typeof v === "object" && !Array.isArray(v) ? v : {};
      extras = Object.fromEntries(Object.entries(obj).filter(([k]) => !(k in props)));
      for (const [key, node] of children) node.set(obj[key]);
    },
  };
}

function arrayNode(s, ctx) {
  const itemSchema = s.items && typeof s.items === "object" && !Array.isArray(s.items) ? s.items : {};
  const list = h("ol", { class: "array-items" });
  let items = [];
  const renumber = () => items.forEach((it, i) => { it.li.dataset.index = String(i); });
  const add = (value) => {
    const node = build(itemSchema, { name: `${ctx.name}[${items.length}]`, required: true, path: `${ctx.path}.${items.length}`, files: ctx.files });
    const entry = { node, li: null };
    const remove = h("button", { type: "button", class: "small ghost", title: "remove item", "aria-label": "remove item" }, "✕");
    entry.li = h("li", { class: "array-item" }, node.el, remove);
    remove.addEventListener("click", () => { items = items.filter((x) => x !== entry); entry.li.remove(); renumber(); });
    items.push(entry);
    list.append(entry.li);
    if (value !== undefined) node.set(value);
    renumber();
  };
  const addButton = h("button", { type: "button", class: "small", dataset: { addItem: ctx.path } }, `+ add ${ctx.name} item`);
  addButton.addEventListener("click", () => add(undefined));
  const el = h("fieldset", { class: "field field-array", dataset: { path: ctx.path } },
    h("legend", {}, ctx.name, ctx.required ? h("span", { class: "req", "aria-hidden": "true" }, "*") : null),
    s.description ? h("div", { class: "help" }, s.description) : null, list, addButton);
  const set = (v) => {
    items = [];
    list.replaceChildren();
    const arr = Array.isArray(v) ? v : Array.isArray(s.default) ? s.default : [];
    arr.forEach((x) => add(x));
  };
  set(undefined);
  return {
    el,
    get: () => {
      const out = items.map((it) => it.node.get()).filter((x) => x !== undefined);
      return out.length || ctx.required ? out : undefined;
    },
    set,
  };
}

function build(raw, ctx) {
  const s = normalise(raw);
  if (s.const !== undefined || (Array.isArray(s.enum) && s.enum.length)) return enumNode(s, ctx);
  if (isBinary(s)) return fileNode(s, ctx);
  switch (s.type) {
    case "object":
      return s.properties && Object.keys(s.properties).length ? objectNode(s, ctx) : jsonNode(s, ctx);
    case "array":
      return Array.isArray(s.prefixItems) ? jsonNode(s, ctx) : arrayNode(s, ctx);
    case "string":
      return stringNode(s, ctx);
    case "number":
    case "integer":
      return numberNode(s, ctx);
    case "boolean":
      return booleanNode(s, ctx);
    default:
      if (s.properties) return objectNode(s, ctx);
      return jsonNode(s, ctx);
  }
}

// A generated form with a "raw JSON" toggle. value() returns the JSON to send.
export class SchemaForm {
  constructor(schema) {
    const root = normalise(schema);
    const isObject = root.type === "object" || (!root.type && root.properties);
    // Chosen files by field path: name and media type travel with the file part.
    this.files = new Map();
    this.root = build(root, { name: "input", required: true, path: isObject ? "" : "input", root: isObject, files: this.files });
    // Top-level binary properties are sent as A2A file parts, which the agent maps back.
    this.binaryFields = isObject
      ? Object.entries(root.properties || {}).filter(([, p]) => isBinary(normalise(p))).map(([k]) => k) : [];
    this.raw = h("textarea", { class: "mono raw-json", rows: 10, spellcheck: "false", "aria-label": "Raw JSON input", hidden: true });
    this.rawToggle = h("input", { type: "checkbox", class: "raw-toggle" });
    this.rawError = h("div", { class: "error-text small", hidden: true });
    this.rawToggle.addEventListener("change", () => this.setRaw(this.rawToggle.checked));
    this.formBody = h("div", { class: "form-body" }, this.root.el);
    this.element = h("div", { class: "schema-form" },
      h("label", { class: "toggle" }, this.rawToggle, " Raw JSON"),
      this.formBody, this.raw, this.rawError);
  }

  get isRaw() {
    return this.rawToggle.checked;
  }

  setRaw(on) {
    this.rawError.hidden = true;
    if (on) {
      let current;
      try {
        current = this.root.get();
      } catch (exc) {
        current = undefined;
      }
      this.raw.value = JSON.stringify(current ?? {}, null, 2);
    } else {
      try {
        this.root.set(this.raw.value.trim() ? JSON.parse(this.raw.value) : undefined);
      } catch (exc) {
        this.rawToggle.checked = true;
        this.rawError.textContent = `Cannot switch back to the form: ${exc.message}`;
        this.rawError.hidden = false;
        return;
      }
    }
    this.rawToggle.checked = on;
    this.raw.hidden = !on;
    this.formBody.hidden = on;
  }

  value() {
    if (this.isRaw) {
      try {
        return JSON.parse(this.raw.value);
      } catch (exc) {
        throw new FormError(`Raw JSON is not valid: ${exc.message}`);
      }
    }
    return this.root.get();
  }

  fill(value) {
    if (this.isRaw) this.raw.value = JSON.stringify(value, null, 2);
    else this.root.set(value);
  }
}
