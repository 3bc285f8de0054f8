// Url: parse, resolve and edit URLs with the WHATWG URL parser (the one browsers use).
// A TypeScript toolkit for the gateway: each export is { id, description, parameters, execute }
// with a zod schema; the gateway's sidecar turns the schema into JSON Schema.

import { z } from "zod";

export const toolkit = "Url";

class UrlError extends Error {
  additionalPromptContent = "Give an absolute URL such as https://example.com/path, or a base URL to resolve against.";
}

function parseUrl(text: string, base?: string): URL {
  if (base !== undefined && !URL.canParse(base)) throw new UrlError(`The base ${JSON.stringify(base)} is not an absolute URL`);
  if (!URL.canParse(text, base)) {
    const hint = base === undefined ? " (relative URLs need a base)" : ` against the base ${JSON.stringify(base)}`;
    throw new UrlError(`${JSON.stringify(text)} is not a valid URL${hint}`);
  }
  return new URL(text, base);
}

function queryOf(url: URL): Record<string, string[]> {
  const query: Record<string, string[]> = {};
  for (const [key, value] of url.searchParams) (query[key] ??= []).push(value);
  return query;
}

const Parsed = z.object({
  href: z.string(),
  origin: z.string(),
  protocol: z.string(),
  username: z.string(),
  password: z.string(),
  hostname: z.string(),
  port: z.number().int().min(0).max(65535).nullable().describe("null when the URL has no explicit port"),
  pathname: z.string(),
  search: z.string(),
  query: z.record(z.string(), z.array(z.string())),
  hash: z.string(),
});

export const parse = {
  id: "parse",
  description: "Split a URL into its parts (scheme, host, port, path, query parameters, fragment), normalised.",
  sideEffects: false,
  parameters: z.object({
    url: z.string().describe("The URL to parse; may be relative when base is given"),
    base: z.string().optional().describe("An absolute URL that a relative url is resolved against"),
  }),
  returns: Parsed,
  async execute({ url, base }: { url: string; base?: string }) {
    const parsed = parseUrl(url, base);
    return {
      href: parsed.href,
      origin: parsed.origin,
      protocol: parsed.protocol.replace(/:$/, ""),
      username: decodeURIComponent(parsed.username),
      password: decodeURIComponent(parsed.password),
      hostname: parsed.hostname,
      port: parsed.port === "" ? null : Number(parsed.port),
      pathname: parsed.pathname,
      search: parsed.search,
      query: queryOf(parsed),
      hash: parsed.hash,
    };
  },
};

export const resolve = {
  id: "resolve",
  description: "Resolve a relative reference (such as ../img/logo.png or ?page=2) against a base URL, as a browser would.",
  sideEffects: false,
  parameters: z.object({
    base: z.string().describe("The absolute URL of the page or document"),
    reference: z.string().describe("The link to resolve: absolute, relative, query-only or fragment-only"),
  }),
  returns: z.object({ href: z.string() }),
  async execute({ base, reference }: { base: string; reference: string }) {
    return { href: parseUrl(reference, parseUrl(base).href).href };
  },
};

export const setQuery = {
  id: "set-query",
  description: "Return the URL with query parameters set (replacing existing values) and/or removed.",
  sideEffects: false,
  parameters: z.object({
    url: z.string().describe("The absolute URL to change"),
    set: z
      .record(z.string(), z.union([z.string(), z.array(z.string())]))
      .default({})
      .describe("Parameters to set; a list gives the parameter several values"),
    remove: z.array(z.string()).default([]).describe("Names of parameters to remove"),
  }),
  returns: z.object({ href: z.string() }),
  async execute({ url, set, remove }: { url: string; set: Record<string, string | string[]>; remove: string[] }) {
    const parsed = parseUrl(url);
    for (const name of remove) parsed.searchParams.delete(name);
    for (const [name, value] of Object.entries(set)) {
      parsed.searchParams.delete(name);
      for (const item of Array.isArray(value) ? value : [value]) parsed.searchParams.append(name, item);
    }
    return { href: parsed.href };
  },
};
