/**
 * An MCP extension the server supports, negotiated as the extensions
 * framework says (SEP-2133, the `extensions` map of the `initialize`
 * capabilities): the server advertises it with its settings, and uses it
 * with a client only when the client advertised it too. What "using" means
 * here is limited to tool `_meta` keys that only the extension's clients
 * read: they are listed to a client that advertised the extension, and
 * left out for one whose `initialize` did not.
 *
 * A stateless HTTP request is served by a server that never saw the
 * client's `initialize`, so its capabilities are unknown; the keys are then
 * listed, since `_meta` is part of every `Tool` and a client without the
 * extension ignores it. Tool results never depend on the extension.
 *
 * @module
 */

/** One supported extension; see the module documentation. */
export interface McpExtension {
  /** The extension identifier, e.g. `io.modelcontextprotocol/ui`. */
  id: string;
  /** The settings advertised in the server's `capabilities.extensions[id]`. */
  settings: Readonly<Record<string, unknown>>;
  /**
   * Whether a client whose `capabilities.extensions[id]` is `clientSettings`
   * can use the extension (`undefined`: the client did not advertise it).
   */
  accepts(clientSettings: unknown): boolean;
  /** Tool `_meta` keys that only this extension's clients read. */
  toolMetaKeys: readonly string[];
}

/** Client capabilities as far as extensions go (`initialize` params `capabilities`). */
export interface ClientExtensionCapabilities {
  /** SEP-2133's map: extension identifier → the client's settings for it. */
  extensions?: Record<string, unknown>;
}

/**
 * The tool `_meta` to list to a client: `meta` without the keys of the
 * extensions the client did not accept. `client` undefined means its
 * capabilities are unknown (stateless HTTP): every key stays. Returns
 * undefined when nothing is left.
 */
export function toolMetaFor(
  meta: Readonly<Record<string, unknown>> | undefined,
  extensions: readonly McpExtension[],
  client: ClientExtensionCapabilities | undefined,
): Record<string, unknown> | undefined {
  if (!meta) return undefined;
  const out: Record<string, unknown> = { ...meta };
  if (client !== undefined) {
    for (const extension of extensions) {
      if (extension.accepts(client.extensions?.[extension.id])) continue;
      for (const key of extension.toolMetaKeys) delete out[key];
    }
  }
  return Object.keys(out).length ? out : undefined;
}
