// Checks the A2A 1.0 signature of the card this page shows, in the browser (WebCrypto).
//
// A card signature is a detached JWS over the RFC 8785 (JCS) canonical form of the card as
// an A2A 1.0 reader sees it. The a2a-sdk builds that form by parsing the card into its
// protobuf type and printing it back (MessageToDict), dropping `signatures` and empty
// values. This module rebuilds the same form from the JSON the page received:
//   * the keys the SDK adds for A2A 0.3 clients are not 1.0 fields and are dropped
//     (top-level `url`, `preferredTransport`, ... and, inside a security scheme, everything
//     but its 1.0 `...SecurityScheme` member);
//   * an extension's `required: false` is the default of a plain protobuf bool, which
//     MessageToDict leaves out (the 0.3 copy adds it back); the other booleans of a card
//     are optional fields, printed when set, and stay;
//   * empty strings, lists and objects and nulls are removed, as the SDK does.
// A card whose shape this does not foresee fails to verify: the page then says "does not
// verify", never "verified".

const LEGACY_KEYS = new Set([
  "url", "preferredTransport", "protocolVersion", "additionalInterfaces", "security",
  "supportsAuthenticatedExtendedCard",
]);

const ALGORITHMS = {
  ES256: { key: { name: "ECDSA", namedCurve: "P-256" }, verify: { name: "ECDSA", hash: "SHA-256" } },
  ES384: { key: { name: "ECDSA", namedCurve: "P-384" }, verify: { name: "ECDSA", hash: "SHA-384" } },
  ES512: { key: { name: "ECDSA", namedCurve: "P-521" }, verify: { name: "ECDSA", hash: "SHA-512" } },
  RS256: { key: { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" }, verify: { name: "RSASSA-PKCS1-v1_5" } },
  RS384: { key: { name: "RSASSA-PKCS1-v1_5", hash: "SHA-384" }, verify: { name: "RSASSA-PKCS1-v1_5" } },
  RS512: { key: { name: "RSASSA-PKCS1-v1_5", hash: "SHA-512" }, verify: { name: "RSASSA-PKCS1-v1_5" } },
  PS256: { key: { name: "RSA-PSS", hash: "SHA-256" }, verify: { name: "RSA-PSS", saltLength: 32 } },
  PS384: { key: { name: "RSA-PSS", hash: "SHA-384" }, verify: { name: "RSA-PSS", saltLength: 48 } },
  PS512: { key: { name: "RSA-PSS", hash: "SHA-512" }, verify: { name: "RSA-PSS", saltLength: 64 } },
  EdDSA: { key: { name: "Ed25519" }, verify: { name: "Ed25519" } },
};

function isObject(v) {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

function cleanEmpty(node) {
  if (Array.isArray(node)) {
    const kept = node.map(cleanEmpty).filter((v) => v !== undefined);
    return kept.length ? kept : undefined;
  }
  if (isObject(node)) {
    const kept = {};
    for (const [key, value] of Object.entries(node)) {
      const v = cleanEmpty(value);
      if (v !== undefined) kept[key] = v;
    }
    return Object.keys(kept).length ? kept : undefined;
  }
  if (node === null || node === "") return undefined;
  return node;
}

// The card as an A2A 1.0 reader sees it, without its signatures.
export function signedView(card) {
  const view = {};
  for (const [key, value] of Object.entries(card)) {
    if (key !== "signatures" && !LEGACY_KEYS.has(key)) view[key] = value;
  }
  if (isObject(view.securitySchemes)) {
    const schemes = {};
    for (const [name, scheme] of Object.entries(view.securitySchemes)) {
      schemes[name] = isObject(scheme)
        ? Object.fromEntries(Object.entries(scheme).filter(([k]) => k.endsWith("SecurityScheme")))
        : scheme;
    }
    view.securitySchemes = schemes;
  }
  const extensions = isObject(view.capabilities) && view.capabilities.extensions;
  if (Array.isArray(extensions)) {
    view.capabilities = {
      ...view.capabilities,
      extensions: extensions.map((e) => (isObject(e) && e.required === false
        ? Object.fromEntries(Object.entries(e).filter(([k]) => k !== "required")) : e)),
    };
  }
  return cleanEmpty(view) || {};
}

// RFC 8785: ECMAScript number and string forms (JSON.stringify), keys in UTF-16 order.
export function canonicalize(value) {
  if (Array.isArray(value)) return `[${value.map(canonicalize).join(",")}]`;
  if (isObject(value)) {
    return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonicalize(value[k])}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

function b64urlDecode(text) {
  const b64 = text.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((text.length + 3) % 4);
  return Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
}

function b64urlEncode(bytes) {
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

async function fetchKeys(jwksUrl) {
  const resp = await fetch(jwksUrl, { headers: { Accept: "application/json" } });
  if (!resp.ok) throw new Error(`no key set at ${jwksUrl} (HTTP ${resp.status})`);
  const doc = await resp.json();
  return Array.isArray(doc.keys) ? doc.keys : [];
}

// {state: "unsigned" | "verified" | "invalid" | "unchecked", kid?, alg?, reason?}
export async function checkSignature(card, jwksUrl) {
  const signatures = Array.isArray(card.signatures) ? card.signatures : [];
  if (!signatures.length) return { state: "unsigned" };
  if (!globalThis.crypto || !crypto.subtle) {
    return { state: "unchecked", reason: "this page is not a secure context (https or localhost), so it has no WebCrypto" };
  }
  let keys;
  try {
    keys = await fetchKeys(jwksUrl);
  } catch (err) {
    return { state: "unchecked", reason: err.message };
  }
  const payload = b64urlEncode(new TextEncoder().encode(canonicalize(signedView(card))));
  let reason = "no signature verifies with the agent's keys: the card was changed after signing, or signed with another key";
  for (const sig of signatures) {
    let header;
    try {
      header = JSON.parse(new TextDecoder().decode(b64urlDecode(String(sig.protected || ""))));
    } catch {
      continue;
    }
    const algorithm = ALGORITHMS[header.alg];
    const jwk = keys.find((k) => k.kid === header.kid);
    if (!algorithm) { reason = `unsupported algorithm ${header.alg}`; continue; }
    if (!jwk) { reason = `key ${header.kid} is not in ${jwksUrl}`; continue; }
    try {
      const publicOnly = Object.fromEntries(Object.entries(jwk).filter(([k]) => k !== "d"));
      const key = await crypto.subtle.importKey("jwk", publicOnly, algorithm.key, false, ["verify"]);
      const data = new TextEncoder().encode(`${sig.protected}.${payload}`);
      if (await crypto.subtle.verify(algorithm.verify, key, b64urlDecode(String(sig.signature || "")), data)) {
        return { state: "verified", kid: header.kid, alg: header.alg };
      }
    } catch (err) {
      reason = `the signature cannot be checked: ${err.message}`;
    }
  }
  return { state: "invalid", reason };
}
