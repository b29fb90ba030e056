/**
 * The shapes of the MCP resources this server serves. A
 * {@link ResourceDefinition} is one static document (the MCP Apps view),
 * listed by `resources/list` and read by its exact URI; a
 * {@link ResourceTemplateDefinition} is a family of resources named by a URI
 * template (a generation job's images), listed by `resources/templates/list`
 * and read through its own `read`, which decides what the caller may see.
 * The server (`server.ts`) tries the static resources first, then each
 * template in order. No subscriptions: nothing here changes once written.
 *
 * @module
 */

import type { Scope } from "./tool.ts";

/** One resource: its listing entry and how to read it. */
export interface ResourceDefinition {
  /** The resource URI, matched exactly by `resources/read`. */
  uri: string;
  /** Programmatic name shown in `resources/list`. */
  name: string;
  /** Human title. */
  title?: string;
  /** What the resource is, for a host (or a person) choosing it. */
  description?: string;
  /** MIME type of the content, shown in the listing and on the content. */
  mimeType: string;
  /** `_meta` of the listing entry (MCP Apps reads `_meta.ui` from it as the default). */
  _meta?: Readonly<Record<string, unknown>>;
  /** `_meta` of the content item `resources/read` returns (preferred over the listing's). */
  contentMeta?: Readonly<Record<string, unknown>>;
  /** The resource's text (UTF-8). */
  read(): string | Promise<string>;
}

/**
 * The JSON-RPC error code of a `resources/read` for a URI the server does
 * not have (MCP 2025-11-25, server/resources "Error Handling": -32002).
 */
export const RESOURCE_NOT_FOUND: number = -32002;

/** What `resources/read` returns for one resource of a template. */
export interface TemplateResourceContents {
  /** The URI read. */
  uri: string;
  /** Its MIME type. */
  mimeType: string;
  /** Base64 bytes (binary resources such as images). */
  blob?: string;
  /** Text (text resources). */
  text?: string;
}

/**
 * A family of readable resources named by one URI template (RFC 6570), such as the
 * full-size images of a generation job. Listed by `resources/templates/list`.
 */
export interface ResourceTemplateDefinition {
  /** The URI template, e.g. `generation://{job_id}/images/{index}`. */
  uriTemplate: string;
  /** Programmatic name. */
  name: string;
  /** Human title. */
  title?: string;
  /** What the resources are, for the model and the user. */
  description?: string;
  /** MIME type shared by every resource of the template, when there is one. */
  mimeType?: string;
  /**
   * Reads `uri` for the caller (`scope`: the HTTP caller's API-key scope; undefined over
   * stdio). Null when `uri` is not of this template, or names nothing this caller may see:
   * the server answers both as resource-not-found, so a job's existence is not disclosed.
   */
  read(uri: string, scope: Scope | undefined): Promise<TemplateResourceContents | null>;
}
