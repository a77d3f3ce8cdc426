// Evaluates flags of a running rollout server through OpenFeature's own OFREP
// providers, and prints what they resolved as one JSON object, for api's Go
// test TestOpenFeatureClients. The server must hold the features that test
// seeds.
//
//   server: @openfeature/server-sdk + @openfeature/ofrep-provider
//           (POST /ofrep/v1/evaluate/flags/{key}, one request per evaluation)
//   web:    @openfeature/web-sdk + @openfeature/ofrep-web-provider
//           (POST /ofrep/v1/evaluate/flags, polled with If-None-Match)
//
// usage: node script.mjs http://127.0.0.1:PORT
import { OpenFeature as ServerAPI } from '@openfeature/server-sdk';
import { OFREPProvider } from '@openfeature/ofrep-provider';
import { OpenFeature as WebAPI, ProviderEvents } from '@openfeature/web-sdk';
import { OFREPWebProvider } from '@openfeature/ofrep-web-provider';

const url = process.argv[2];
if (!url) {
  console.error('usage: node script.mjs SERVER_URL');
  process.exit(2);
}

// details keeps what the test checks of an evaluation's details, with null
// for what is absent, so that JSON keeps it.
function details(d) {
  return {
    value: d.value ?? null,
    variant: d.variant ?? null,
    reason: d.reason ?? null,
    errorCode: d.errorCode ?? null,
    metadata: d.flagMetadata ?? {},
  };
}

function within(ms, what, promise) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

async function waitFor(ms, what, condition) {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const out = {};

// Server side: one request per evaluation, the context given with it.
await ServerAPI.setProviderAndWait(new OFREPProvider({ baseUrl: url }));
const server = ServerAPI.getClient();
const user = { targetingKey: 'user-1' };
out.server = {
  string: details(await server.getStringDetails('checkout', 'code-default', user)),
  override: details(await server.getStringDetails('checkout', 'code-default', { targetingKey: 'vip' })),
  boolean: details(await server.getBooleanDetails('dark-mode', false, user)),
  object: details(await server.getObjectDetails('banner', { color: 'code-default' }, user)),
  number: details(await server.getNumberDetails('limit', -1, user)),
  disabledFallback: details(await server.getStringDetails('paused', 'code-default', user)),
  disabled: details(await server.getStringDetails('killed', 'code-default', user)),
  unknown: details(await server.getStringDetails('nope', 'code-default', user)),
  noTargetingKey: details(await server.getStringDetails('checkout', 'code-default', {})),
};

// Web side: all flags at once for the context set beforehand, polled; every
// request and its answer is recorded to show the ETag round trip.
const calls = [];
async function recordingFetch(request, init) {
  const response = await fetch(request, init);
  calls.push({
    ifNoneMatch: request.headers.get('If-None-Match'),
    status: response.status,
    etag: response.headers.get('ETag'),
  });
  return response;
}
const provider = new OFREPWebProvider({
  baseUrl: url,
  pollInterval: 100,
  cacheMode: 'disabled',
  fetchImplementation: recordingFetch,
});
await WebAPI.setContext({ targetingKey: 'user-1' });
await within(5000, 'the web provider to be ready', WebAPI.setProviderAndWait(provider));
const web = WebAPI.getClient();
const resolveWeb = () => ({
  string: details(web.getStringDetails('checkout', 'code-default')),
  boolean: details(web.getBooleanDetails('dark-mode', false)),
  object: details(web.getObjectDetails('banner', { color: 'code-default' })),
  number: details(web.getNumberDetails('limit', -1)),
  disabledFallback: details(web.getStringDetails('paused', 'code-default')),
  disabled: details(web.getStringDetails('killed', 'code-default')),
  unknown: details(web.getStringDetails('nope', 'code-default')),
});
out.web = { before: resolveWeb() };

// Polls with the ETag are answered 304 while nothing changes...
await waitFor(5000, 'a poll answered 304', () => calls.some((c) => c.status === 304));

// ...until a feature changes: pin user-1 to another bucket of checkout.
const pinned = ['A', 'B', 'C'].find((b) => b !== out.web.before.string.variant);
const changed = new Promise((resolve) => web.addHandler(ProviderEvents.ConfigurationChanged, resolve));
const put = await fetch(`${url}/api/features/checkout/overrides/user-1`, {
  method: 'PUT',
  headers: { 'Content-Type': 'application/json' },
  body: JSON.stringify({ bucket: pinned }),
});
if (!put.ok) throw new Error(`pinning user-1: ${put.status} ${await put.text()}`);
const event = await within(5000, 'ConfigurationChanged', changed);
out.web.pinned = pinned;
out.web.flagsChanged = event.flagsChanged ?? null;
out.web.after = { string: details(web.getStringDetails('checkout', 'code-default')) };
out.web.calls = calls.slice();

await WebAPI.close();
await ServerAPI.close();
console.log(JSON.stringify(out));
process.exit(0);
