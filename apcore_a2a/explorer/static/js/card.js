// Renders the agent card panel and the skills list, and reads what the page needs from
// the card: the JSON-RPC endpoint, the auth header, and apcore's skill schemas.

import { badge, clear, h, jsonBlock } from "./render.js";

export const SCHEMA_EXTENSION = "urn:apcore:a2a:skill-schemas:v1";

export function skillSchemas(card) {
  const exts = (card.capabilities && card.capabilities.extensions) || [];
  const ext = exts.find((e) => e.uri === SCHEMA_EXTENSION);
  return (ext && ext.params && ext.params.skills) || {};
}

// The JSON-RPC 1.0 interface. A URL on another origin is reached through this page's
// origin at the same path: the CSP allows only 'self', and the explorer is mounted on the
// agent's own app, so the path is the same behind any host name or proxy.
export function jsonRpcEndpoint(card, cardUrl) {
  const ifaces = (card.supportedInterfaces || []).filter((i) => String(i.protocolBinding || "").toUpperCase() === "JSONRPC");
  const v1 = ifaces.find((i) => String(i.protocolVersion || "").startsWith("1."));
  const chosen = v1 || ifaces[0];
  if (!chosen) return null;
  const declared = new URL(chosen.url, cardUrl);
  const rewritten = declared.origin !== location.origin;
  const url = rewritten ? new URL(declared.pathname + declared.search, location.origin) : declared;
  return { url: url.href, declared: declared.href, rewritten, version: chosen.protocolVersion || "" };
}

export function declaresSecurity(card) {
  return Object.keys(card.securitySchemes || {}).length > 0 || (card.securityRequirements || []).length > 0;
}

const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

// Header carrying the token: an API-key scheme in a header names its own header,
// everything else gets "Authorization: Bearer". When the card offers both, a token shaped
// like a JWT goes as Bearer and anything else as the API key.
export function authHeaderFor(card, token) {
  const value = token.trim().replace(/^bearer\s+/i, "");
  if (!value) return {};
  const schemes = Object.values(card.securitySchemes || {});
  const bearer = schemes.find((s) => s.httpAuthSecurityScheme || s.oauth2SecurityScheme || s.openIdConnectSecurityScheme);
  const apiKey = schemes.map((s) => s.apiKeySecurityScheme).find((s) => s && String(s.location).toLowerCase() === "header" && s.name);
  if (apiKey && (!bearer || !JWT_SHAPE.test(value))) return { [apiKey.name]: value };
  return { Authorization: `Bearer ${value}` };
}

function schemeText(scheme) {
  if (scheme.httpAuthSecurityScheme) {
    const s = scheme.httpAuthSecurityScheme;
    return `HTTP ${s.scheme || ""}${s.bearerFormat ? ` (${s.bearerFormat})` : ""}`;
  }
  if (scheme.apiKeySecurityScheme) {
    const s = scheme.apiKeySecurityScheme;
    return `API key in ${s.location} "${s.name}"`;
  }
  if (scheme.oauth2SecurityScheme) return "OAuth 2.0";
  if (scheme.openIdConnectSecurityScheme) return `OpenID Connect ${scheme.openIdConnectSecurityScheme.openIdConnectUrl || ""}`;
  if (scheme.mtlsSecurityScheme) return "mutual TLS";
  return JSON.stringify(scheme);
}

const yesNo = (v) => badge(v ? "yes" : "no", v ? "ok" : "off");

export function renderCard(el, card, endpoint, extended = false) {
  const caps = card.capabilities || {};
  const exts = caps.extensions || [];
  const schemes = Object.entries(card.securitySchemes || {});
  clear(el,
    h("h3", { id: "agent-name" }, card.name || "(unnamed agent)"),
    h("div", { class: "row" }, card.version ? badge(`v${card.version}`) : null,
      card.provider && card.provider.organization ? badge(card.provider.organization, "muted") : null,
      declaresSecurity(card) ? badge("🔒 secured", "warn") : badge("open", "ok"),
      extended ? badge("extended card", "info", "the card this token's caller gets") : null,
      h("span", { id: "card-signature" }, (card.signatures || []).length
        ? badge("signature: checking…", "muted")
        : badge("unsigned", "muted", "the card carries no A2A signature"))),
    card.description ? h("p", { class: "description" }, card.description) : null,
    card.documentationUrl && /^https?:/i.test(card.documentationUrl)
      ? h("a", { href: card.documentationUrl, target: "_blank", rel: "noopener noreferrer" }, "documentation ↗") : null,
    h("h4", {}, "Interfaces"),
    h("table", { class: "mini ifaces" }, h("tbody", {}, (card.supportedInterfaces || []).map((i) => h("tr", {},
      h("td", {}, i.protocolBinding), h("td", {}, i.protocolVersion || "–"), h("td", {}, h("code", { class: "ellipsis", title: i.url }, i.url)))))),
    endpoint && endpoint.rewritten
      ? h("p", { class: "muted small" }, `Calls go to ${endpoint.url} (same origin as this page).`) : null,
    h("h4", {}, "Capabilities"),
    h("table", { class: "mini" }, h("tbody", {},
      h("tr", {}, h("td", {}, "streaming"), h("td", {}, yesNo(caps.streaming))),
      h("tr", {}, h("td", {}, "push notifications"), h("td", {}, yesNo(caps.pushNotifications))),
      h("tr", {}, h("td", {}, "extended card"), h("td", {}, yesNo(caps.extendedAgentCard))))),
    exts.length ? h("ul", { class: "plain small" }, exts.map((e) => h("li", {}, h("code", {}, e.uri), e.required ? badge("required", "warn") : null))) : null,
    h("h4", {}, "Security"),
    schemes.length
      ? h("ul", { class: "plain small" }, schemes.map(([name, s]) => h("li", {}, h("strong", {}, name), `: ${schemeText(s)}`)))
      : h("div", { class: "muted small" }, "No security declared."),
    h("h4", {}, "Modes"),
    h("div", { class: "small" }, "in: ", (card.defaultInputModes || []).join(", ") || "–", " · out: ", (card.defaultOutputModes || []).join(", ") || "–"),
    h("details", { class: "small" }, h("summary", {}, "raw card"), jsonBlock(card)));
}

// Replaces the signature badge with the outcome of checkSignature (card_sig.js).
export function renderSignature(el, result) {
  if (!el) return;
  const views = {
    verified: () => badge("✓ signed", "ok", `signature verified (${result.alg}, key ${result.kid}) against the agent's /.well-known/jwks.json`),
    invalid: () => badge("signature does not verify", "danger", result.reason),
    unchecked: () => badge("signature not checked", "warn", result.reason),
    unsigned: () => badge("unsigned", "muted", "the card carries no A2A signature"),
  };
  clear(el, (views[result.state] || views.unchecked)());
  el.dataset.state = result.state;
}

export function annotationBadges(annotations) {
  const a = annotations || {};
  return [
    a.readonly ? badge("read-only", "ok", "does not change anything") : null,
    a.destructive ? badge("destructive", "danger", "may delete or overwrite data") : null,
    a.requiresApproval ? badge("requires approval", "warn", "a person must approve each call") : null,
    a.streaming ? badge("streaming", "info", "produces results incrementally") : null,
    a.idempotent ? badge("idempotent", "muted") : null,
  ];
}

export function renderSkillList(list, skills, schemas, filter, selectedId, onSelect) {
  const q = filter.trim().toLowerCase();
  const shown = skills.filter((s) => !q || [s.id, s.name, s.description, ...(s.tags || [])].join(" ").toLowerCase().includes(q));
  clear(list, shown.length ? shown.map((skill) => {
    const item = h("li", {
      class: `skill${skill.id === selectedId ? " selected" : ""}`, role: "option", tabindex: "0",
      "aria-selected": skill.id === selectedId ? "true" : "false", dataset: { skillId: skill.id },
    },
    h("div", { class: "skill-name" }, skill.name || skill.id),
    h("code", { class: "skill-id" }, skill.id),
    skill.description ? h("div", { class: "skill-desc" }, skill.description) : null,
    h("div", { class: "chips" }, (skill.tags || []).map((t) => h("span", { class: "chip" }, t)),
      annotationBadges((schemas[skill.id] || {}).annotations)));
    item.addEventListener("click", () => onSelect(skill));
    item.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); onSelect(skill); } });
    return item;
  }) : h("li", { class: "muted" }, skills.length ? "No skill matches the filter." : "This agent declares no skills."));
}
