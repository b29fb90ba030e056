import assert from "node:assert/strict";
import { AddressSet, clientAddress, clientKey, parseAddressRange } from "./client_address.ts";

Deno.test("client keys: IPv4 as is, IPv6 by its /64, IPv4-mapped IPv6 as IPv4", () => {
  assert.equal(clientKey("192.0.2.1"), "192.0.2.1");
  assert.equal(clientKey("2001:db8:1:2:aaaa::1"), "2001:db8:1:2::/64");
  assert.equal(clientKey("2001:db8:1:2:bbbb:cccc:dddd:eeee"), "2001:db8:1:2::/64");
  assert.equal(clientKey("::ffff:192.0.2.1"), "192.0.2.1");
  assert.equal(clientKey("not an address"), "not an address");
});

Deno.test("address ranges: CIDR matching in both families; config entries are checked", () => {
  const set = new AddressSet(
    ["10.0.0.0/8", "192.0.2.7", "2001:db8::/32", "fd00::/7"].map(parseAddressRange),
  );
  for (const yes of ["10.1.2.3", "192.0.2.7", "::ffff:10.9.9.9", "2001:db8:ffff::1", "fdff::1"]) {
    assert.ok(set.has(yes), yes);
  }
  for (const no of ["11.0.0.1", "192.0.2.8", "2001:db9::1", "fe00::1", "junk"]) {
    assert.ok(!set.has(no), no);
  }
  assert.throws(() => parseAddressRange("10.0.0.0/33"), /prefix length \/33 is out of range/);
  assert.throws(() => parseAddressRange("example.com"), /is not an IP address or CIDR range/);
  assert.ok(new AddressSet([]).empty);
});

Deno.test("the client address is read only from trusted proxies, right to left", () => {
  const trusted = new AddressSet(["127.0.0.1", "10.0.0.0/8"].map(parseAddressRange));
  const xff = (value: string) => [["x-forwarded-for", value] as const];
  assert.equal(
    clientAddress("127.0.0.1", xff("1.1.1.1, 2.2.2.2"), trusted, "x-forwarded-for"),
    "2.2.2.2",
  );
  assert.equal(
    clientAddress(
      "127.0.0.1",
      [...xff("1.1.1.1"), ...xff("2.2.2.2, 10.0.0.1")],
      trusted,
      "x-forwarded-for",
    ),
    "2.2.2.2",
    "several header lines are one list, in order",
  );
  assert.equal(
    clientAddress("10.0.0.2", xff("10.0.0.3, 10.0.0.4"), trusted, "x-forwarded-for"),
    "10.0.0.3",
  );
  assert.equal(clientAddress("8.8.8.8", xff("2.2.2.2"), trusted, "x-forwarded-for"), "8.8.8.8");
  assert.equal(clientAddress("127.0.0.1", [], trusted, "x-forwarded-for"), "127.0.0.1");
  assert.equal(
    clientAddress("127.0.0.1", xff("1.2.3.4:5678"), trusted, "x-forwarded-for"),
    "1.2.3.4",
  );
  assert.equal(
    clientAddress(
      "127.0.0.1",
      [["forwarded", 'for=_hidden, for="[2001:db8::5]"']],
      trusted,
      "forwarded",
    ),
    "2001:db8::5",
  );
  assert.equal(
    clientAddress("127.0.0.1", [["forwarded", "for=unknown"]], trusted, "forwarded"),
    "127.0.0.1",
  );
});
