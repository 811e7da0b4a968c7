/**
 * Gemini CLI's system settings in the guest image. System settings override the user's and the
 * workspace's, so a run is headless whatever the VM's home holds: key auth from the environment, no
 * folder-trust check (a headless run in an untrusted folder stops), no telemetry, usage statistics
 * or update checks (a VM reaches nothing but its provider).
 */
export const GEMINI_SYSTEM_SETTINGS_PATH = '/etc/gemini-cli/settings.json';
/** The same for provider `vertex`, chosen with GEMINI_CLI_SYSTEM_SETTINGS_PATH: an auth type in settings wins over the environment's. */
export const GEMINI_VERTEX_SETTINGS_PATH = '/etc/gemini-cli/vertex-ai.json';

export type GeminiAuthType = 'gemini-api-key' | 'vertex-ai';

export function geminiSystemSettings(authType: GeminiAuthType): object {
  return {
    general: { enableAutoUpdate: false, enableAutoUpdateNotification: false },
    privacy: { usageStatisticsEnabled: false },
    telemetry: { enabled: false },
    security: { auth: { selectedType: authType }, folderTrust: { enabled: false } },
  };
}

/** Path in the image → contents: what the image build (src/image/harnesses.ts) writes beside the gemini program. */
export function geminiSettingsFiles(): Record<string, string> {
  return {
    [GEMINI_SYSTEM_SETTINGS_PATH]: `${JSON.stringify(geminiSystemSettings('gemini-api-key'), null, 2)}\n`,
    [GEMINI_VERTEX_SETTINGS_PATH]: `${JSON.stringify(geminiSystemSettings('vertex-ai'), null, 2)}\n`,
  };
}
