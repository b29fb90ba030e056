/**
 * Who a connection is from, for the per-client limits of the connection
 * guard and the API-key failure budget: the TCP peer's address, or, when
 * the peer is one of `[server] trusted_proxies`, the client address that
 * proxy names in its request head.
 *
 * The rule (the one nginx's `real_ip_recursive on` and Express's
 * `trust proxy` with a list apply): take the addresses of the configured
 * header (`X-Forwarded-For: client, proxy1, proxy2`, every such line in
 * order; or RFC 7239 `Forwarded: for=…`), walk them from the right, skip
 * each that is itself a trusted proxy, and the first that is not is the
 * client. A proxy appends the address it received from, so the entries
 * right of the first untrusted one were written by trusted proxies, and
 * what lies left of it may be forged by the client. When the header is
 * missing, an entry is not an address (`unknown`, an obfuscated `_name`),
 * or every entry is trusted, the client is the last address read
 * (the peer itself when there is none).
 *
 * Limits count per client key ({@link clientKey}): an IPv4 address, or the
 * /64 of an IPv6 address (one subscriber's usual allocation, so a client
 * cannot multiply its share by changing the low 64 bits). An IPv4-mapped
 * IPv6 address (`::ffff:192.0.2.1`) is the IPv4 address.
 *
 * @module
 */

import { isIPv4, isIPv6 } from "node:net";

/** An address range: `address/prefixLength`, both families. */
export interface AddressRange {
  /** An IPv4 or IPv6 address (the range's first address, or any in it). */
  address: string;
  /** Leading bits that must match (32 or 128 for one address). */
  prefixLength: number;
}

/** The header a trusted proxy names the client in. */
export type ForwardedHeader = "x-forwarded-for" | "forwarded";

/** An address as 16 bytes (IPv4 mapped into `::ffff:0:0/96`), or null when it is none. */
export function addressBytes(text: string): Uint8Array | null {
  let value = text.trim();
  // `[v6]` and `[v6]:port` (Forwarded, some proxies), `v4:port`.
  const bracket = /^\[([^\]]+)\](?::\d+)?$/.exec(value);
  if (bracket) value = bracket[1];
  else if (/^[\d.]+:\d+$/.test(value)) value = value.slice(0, value.lastIndexOf(":"));
  const zone = value.indexOf("%");
  if (zone !== -1) value = value.slice(0, zone);
  const out = new Uint8Array(16);
  if (isIPv4(value)) {
    out[10] = 0xff;
    out[11] = 0xff;
    value.split(".").forEach((part, i) => out[12 + i] = Number(part));
    return out;
  }
  if (!isIPv6(value)) return null;
  let tail: number[] = [];
  const dotted = value.lastIndexOf(":");
  if (value.includes(".")) {
    tail = value.slice(dotted + 1).split(".").map(Number);
    value = value.slice(0, dotted + 1) + "0:0";
  }
  const [left, right] = value.includes("::") ? value.split("::") : [value, null];
  const groups = (s: string) => s === "" ? [] : s.split(":").map((g) => parseInt(g, 16));
  const head = groups(left);
  const rest = right === null ? [] : groups(right);
  const all = right === null
    ? head
    : [...head, ...new Array(8 - head.length - rest.length).fill(0), ...rest];
  all.forEach((g, i) => {
    out[i * 2] = g >> 8;
    out[i * 2 + 1] = g & 0xff;
  });
  if (tail.length === 4) out.set(tail, 12);
  return out;
}

function isMappedV4(bytes: Uint8Array): boolean {
  for (let i = 0; i < 10; i++) if (bytes[i] !== 0) return false;
  return bytes[10] === 0xff && bytes[11] === 0xff;
}

/**
 * The key a client's limits are counted under: the IPv4 address, or the
 * IPv6 /64 written `2001:db8:1:2::/64`; an address that does not parse is
 * its own key.
 */
export function clientKey(address: string): string {
  const bytes = addressBytes(address);
  if (!bytes) return address;
  if (isMappedV4(bytes)) return bytes.subarray(12).join(".");
  const groups: string[] = [];
  for (let i = 0; i < 8; i += 2) groups.push(((bytes[i] << 8) | bytes[i + 1]).toString(16));
  return `${groups.join(":")}::/64`;
}

/** A set of address ranges; see {@link AddressRange}. */
export class AddressSet {
  readonly #ranges: Array<{ bytes: Uint8Array; bits: number }>;

  /** Builds the set; throws on an entry that is not an address or a prefix length out of range. */
  constructor(ranges: readonly AddressRange[]) {
    this.#ranges = ranges.map((r) => {
      const bytes = addressBytes(r.address);
      if (!bytes) throw new Error(`"${r.address}" is not an IP address`);
      const v4 = isMappedV4(bytes) && isIPv4(r.address.trim());
      const max = v4 ? 32 : 128;
      if (!Number.isInteger(r.prefixLength) || r.prefixLength < 0 || r.prefixLength > max) {
        throw new Error(`prefix length /${r.prefixLength} is out of range for ${r.address}`);
      }
      return { bytes, bits: v4 ? 96 + r.prefixLength : r.prefixLength };
    });
  }

  /** Whether the set is empty. */
  get empty(): boolean {
    return this.#ranges.length === 0;
  }

  /** Whether `address` lies in one of the ranges. */
  has(address: string): boolean {
    const bytes = addressBytes(address);
    if (!bytes) return false;
    return this.#ranges.some((r) => {
      const whole = r.bits >> 3;
      for (let i = 0; i < whole; i++) if (bytes[i] !== r.bytes[i]) return false;
      const partial = r.bits & 7;
      if (partial === 0) return true;
      const mask = (0xff << (8 - partial)) & 0xff;
      return (bytes[whole] & mask) === (r.bytes[whole] & mask);
    });
  }
}

/** Parses `address` or `address/bits` (config text); throws a message naming the entry. */
export function parseAddressRange(text: string): AddressRange {
  const slash = text.indexOf("/");
  const address = (slash === -1 ? text : text.slice(0, slash)).trim();
  const v4 = isIPv4(address);
  if (!v4 && !isIPv6(address)) throw new Error(`"${text}" is not an IP address or CIDR range`);
  const bits = slash === -1 ? (v4 ? 32 : 128) : Number(text.slice(slash + 1));
  const range = { address, prefixLength: bits };
  new AddressSet([range]); // checks the prefix length
  return range;
}

/** The `for=` addresses of `Forwarded` values (RFC 7239 §4, §6), in order. */
function forwardedFor(values: string[]): string[] {
  const out: string[] = [];
  for (const value of values) {
    for (const element of value.split(",")) {
      for (const pair of element.split(";")) {
        const eq = pair.indexOf("=");
        if (eq === -1 || pair.slice(0, eq).trim().toLowerCase() !== "for") continue;
        out.push(pair.slice(eq + 1).trim().replace(/^"(.*)"$/, "$1"));
      }
    }
  }
  return out;
}

/**
 * The client address of a connection from `peer` whose request head has
 * `headers` (name in lower case, value), by the rule of the module
 * documentation.
 */
export function clientAddress(
  peer: string,
  headers: ReadonlyArray<readonly [string, string]>,
  trusted: AddressSet,
  header: ForwardedHeader,
): string {
  if (trusted.empty || !trusted.has(peer)) return peer;
  const values = headers.filter(([name]) => name === header).map(([, value]) => value);
  const entries = header === "forwarded"
    ? forwardedFor(values)
    : values.flatMap((v) => v.split(",")).map((e) => e.trim()).filter((e) => e !== "");
  let client = peer;
  for (let i = entries.length - 1; i >= 0; i--) {
    const bytes = addressBytes(entries[i]);
    if (!bytes) break; // not an address: nothing further left can be trusted
    client = normalAddress(entries[i]);
    if (!trusted.has(client)) break;
  }
  return client;
}

/** An address entry without brackets, port or zone, IPv6 as RFC 5952 writes it. */
function normalAddress(entry: string): string {
  const bytes = addressBytes(entry)!;
  if (isMappedV4(bytes)) return bytes.subarray(12).join(".");
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2) groups.push((bytes[i] << 8) | bytes[i + 1]);
  // The longest run of two or more zero groups (the first of equals) becomes "::".
  let best = { at: -1, length: 1 };
  for (let i = 0; i < 8;) {
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > best.length) best = { at: i, length: j - i };
    i = j === i ? i + 1 : j;
  }
  const hex = (list: number[]) => list.map((g) => g.toString(16)).join(":");
  if (best.at === -1) return hex(groups);
  return `${hex(groups.slice(0, best.at))}::${hex(groups.slice(best.at + best.length))}`;
}
