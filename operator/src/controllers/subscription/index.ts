export { subscriptionController } from './controller.ts';
