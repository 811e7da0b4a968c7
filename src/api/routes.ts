import type { Operation } from './operation.ts';
import { whoami } from './operations/whoami.ts';
import { listHarnesses } from './operations/listHarnesses.ts';
import { getHarness } from './operations/getHarness.ts';
import { listVMs } from './operations/listVMs.ts';
import { createVM } from './operations/createVM.ts';
import { getVM } from './operations/getVM.ts';
import { waitVM } from './operations/waitVM.ts';
import { stopVM, startVM, restartVM, reprovisionVM, suspendVM } from './operations/lifecycle.ts';
import { runVMTask } from './operations/runVMTask.ts';
import { listTemplates } from './operations/listTemplates.ts';
import { getTemplate } from './operations/getTemplate.ts';
import { forkTemplate } from './operations/forkTemplate.ts';
import { captureTemplate } from './operations/captureTemplate.ts';
import { getBilling } from './operations/getBilling.ts';
import { getUsage } from './operations/getUsage.ts';
import { listKeys, issueKey, revokeKey } from './operations/keys.ts';
import { destroyVM, setVMSecrets } from './operations/extensions.ts';
import { loginStart, loginComplete } from './operations/login.ts';
import { setVMEgress, listVMEgress } from './operations/egress.ts';
import { listVMRuns, getVMRun, cancelVMRun, streamVMRun } from './operations/runs.ts';
import { listEvents } from './operations/events.ts';
import { listLedger } from './operations/ledger.ts';
import { getVMMetrics } from './operations/metrics.ts';
import { updateVM } from './operations/updateVM.ts';
import { createWebhook, listWebhooks, deleteWebhook, listWebhookDeliveries } from './operations/webhooks.ts';
import { openVMShell } from './operations/openVMShell.ts';
import { readVMFile, writeVMFile } from './operations/files.ts';
import { getBaseImage } from './operations/images.ts';
import { createImage, listImages, getImage, deleteImage, streamImageBuild } from './operations/imageBuilds.ts';
import { createTenant, setCard, removeCard, addCredits } from './admin/tenants.ts';
import { listInternalCredentials, revokeHostCredential, revokeReplicaCredential } from './admin/internal.ts';
import { getLimits, adminSetLimits } from './operations/limits.ts';
import { listVMPorts, setVMPort, rotatePreviewToken } from './operations/previews.ts';
import { branchVM, createSnapshot, listSnapshots, getSnapshot, deleteSnapshot, createVMFromSnapshot } from './operations/snapshots.ts';

/** Every customer operation: the 19 of the contract, then the extensions. */
export const CUSTOMER_OPERATIONS: Operation[] = [
  whoami,
  listHarnesses,
  getHarness,
  listVMs,
  createVM,
  getVM,
  stopVM,
  startVM,
  restartVM,
  reprovisionVM,
  runVMTask,
  listVMRuns,
  getVMRun,
  streamVMRun,
  cancelVMRun,
  listTemplates,
  getTemplate,
  forkTemplate,
  captureTemplate,
  getBilling,
  getUsage,
  listKeys,
  issueKey,
  revokeKey,
  destroyVM,
  setVMSecrets,
  setVMEgress,
  listVMEgress,
  getVMMetrics,
  updateVM,
  listEvents,
  createWebhook,
  listWebhooks,
  deleteWebhook,
  listWebhookDeliveries,
  listLedger,
  openVMShell,
  readVMFile,
  writeVMFile,
  loginStart,
  loginComplete,
  suspendVM,
  waitVM,
  getLimits,
  getBaseImage,
  createImage,
  listImages,
  getImage,
  deleteImage,
  streamImageBuild,
  listVMPorts,
  setVMPort,
  rotatePreviewToken,
  branchVM,
  createSnapshot,
  listSnapshots,
  getSnapshot,
  deleteSnapshot,
  createVMFromSnapshot,
];

export const ADMIN_OPERATIONS: Operation[] = [createTenant, setCard, removeCard, addCredits, adminSetLimits, listInternalCredentials, revokeHostCredential, revokeReplicaCredential];
