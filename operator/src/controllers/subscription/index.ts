export { createSubscriptionController, subscriptionController } from './controller.ts';
