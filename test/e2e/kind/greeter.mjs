// The smallest Restate SDK service: what test/e2e/kind.sh registers with a Cluster through a Deployment resource.
import * as restate from '@restatedev/restate-sdk';

const greeter = restate.service({
  name: 'Greeter',
  handlers: {
    greet: async (ctx, name) => {
      const greeting = await ctx.run('greeting', () => `Hello, ${name}!`);
      return greeting;
    },
  },
});

await restate.serve({ services: [greeter], port: 9080 });
