import { dashboardRoutes } from '../../web/routes.ts';
import { authRoutes } from '../auth/routes.ts';
import { approvalRoutes } from './approvals.ts';
import { controlRoutes } from './controls.ts';
import { limitRoutes } from './limits.ts';
import { messageRoutes } from './messages.ts';
import { operationRoutes } from './operations.ts';
import { promptRoutes } from './prompts.ts';
import { retryPolicyRoutes } from './retry-policy.ts';
import { scheduleRoutes } from './schedules.ts';
import { sessionRoutes } from './sessions.ts';
import { webhookRoutes } from './webhooks.ts';
import { workspaceRoutes } from './workspace.ts';

/** Every route of the API, in the order it is served and documented; a route of a new group is listed here. */
export const API_ROUTES = [
  ...sessionRoutes,
  ...promptRoutes,
  ...controlRoutes,
  ...workspaceRoutes,
  ...approvalRoutes,
  ...messageRoutes,
  ...retryPolicyRoutes,
  ...limitRoutes,
  ...webhookRoutes,
  ...scheduleRoutes,
  ...authRoutes,
  ...operationRoutes,
];

/** The dashboard's pages and files (served unless `dashboard: false`; documented always). */
export { dashboardRoutes };

/** Every route, the dashboard's included: what the OpenAPI document lists and the guard's route table. */
export const ALL_ROUTES = [...API_ROUTES, ...dashboardRoutes];
