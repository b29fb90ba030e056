import assert from "node:assert/strict";
import { bypassesProxy, proxyFor } from "./proxy.ts";

const env = (vars: Record<string, string>) => (name: string) => vars[name];
const HF = new URL("https://huggingface.co/x/resolve/abc/f");

Deno.test("proxyFor: the variable Deno's fetch reads, in its order, password hidden", () => {
  assert.equal(proxyFor(HF, env({})), undefined);
  assert.deepEqual(proxyFor(HF, env({ https_proxy: "http://127.0.0.1:9" })), {
    variable: "https_proxy",
    shown: "http://127.0.0.1:9",
  });
  assert.deepEqual(
    proxyFor(HF, env({ HTTPS_PROXY: "http://u:secret@proxy:3128", ALL_PROXY: "http://all:1" })),
    { variable: "ALL_PROXY", shown: "http://all:1" },
  );
  assert.deepEqual(proxyFor(HF, env({ HTTPS_PROXY: "http://u:secret@proxy:3128" })), {
    variable: "HTTPS_PROXY",
    shown: "http://u:***@proxy:3128",
  });
  // HTTP_PROXY is for http URLs only.
  assert.equal(proxyFor(HF, env({ HTTP_PROXY: "http://p:1" })), undefined);
  assert.equal(
    proxyFor(new URL("http://127.0.0.1:8000/f"), env({ HTTP_PROXY: "http://p:1" }))?.variable,
    "HTTP_PROXY",
  );
  // NO_PROXY wins.
  assert.equal(
    proxyFor(HF, env({ HTTPS_PROXY: "http://p:1", NO_PROXY: "localhost,.huggingface.co" })),
    undefined,
  );
});

Deno.test("bypassesProxy: exact names, subdomains, ports and *", () => {
  assert.ok(bypassesProxy("huggingface.co", "huggingface.co"));
  assert.ok(bypassesProxy("cdn.huggingface.co", "huggingface.co"));
  assert.ok(bypassesProxy("cdn.huggingface.co", ".huggingface.co"));
  assert.ok(bypassesProxy("127.0.0.1", "example.com, 127.0.0.1:8080"));
  assert.ok(bypassesProxy("anything", "*"));
  assert.ok(!bypassesProxy("nothuggingface.co", "huggingface.co"));
  assert.ok(!bypassesProxy("huggingface.co", undefined));
});
