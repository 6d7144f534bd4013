export { createDeploymentController, deploymentController, type DeploymentControllerOptions } from './controller.ts';
export { drainCountsSql, sqlDrainProbe, type DrainCounts, type DrainProbe, type DrainQuery } from './drain.ts';
