// Module hooks for tool modules (registered by sidecar.mjs through node:module's register()).
//
// - A bare import a tool module cannot resolve from its own folder ("zod") is
//   resolved from the sidecar's folder instead, so tool modules anywhere on disk
//   use the packages installed here, and the very same zod instance.
// - .ts files are ES modules even without a package.json saying "type": "module".

let fallbackParent;

export async function initialize(data) {
  fallbackParent = data.fallbackParent;
}

function isBare(specifier) {
  return !/^(\.{0,2}\/|[A-Za-z][A-Za-z0-9+.-]*:)/.test(specifier);
}

export async function resolve(specifier, context, nextResolve) {
  let resolved;
  try {
    resolved = await nextResolve(specifier, context);
  } catch (error) {
    if (error?.code !== "ERR_MODULE_NOT_FOUND" || !isBare(specifier) || !fallbackParent) throw error;
    resolved = await nextResolve(specifier, { ...context, parentURL: fallbackParent });
  }
  if (resolved.url.startsWith("file:") && /\.tsx?$/.test(new URL(resolved.url).pathname)) {
    return { ...resolved, format: "module" };
  }
  return resolved;
}
