/**
 * Discovery manifests the SDK cannot produce, for registrations that need one (served with `fixedDiscovery`).
 */

/**
 * The lab's Greeter (`greet`, `noInput`) and the Counter (`add`, `get`) as the SDK describes them, but announcing
 * protocol versions 5 to 6 only.
 */
export const GREETER_COUNTER_V5_TO_V6 = JSON.stringify({
  protocolMode: 'BIDI_STREAM',
  minProtocolVersion: 5,
  maxProtocolVersion: 6,
  services: [
    { name: 'Greeter', ty: 'SERVICE', handlers: [{ name: 'greet' }, { name: 'noInput' }] },
    {
      name: 'Counter',
      ty: 'VIRTUAL_OBJECT',
      handlers: [
        { name: 'add', ty: 'EXCLUSIVE' },
        { name: 'get', ty: 'SHARED' },
      ],
    },
  ],
});
