export { deploymentController } from './controller.ts';
