/**
 * Defaults oscar applies when it resolves an OperatingSystemConfig. They live here rather than
 * in the CRD so the API server stores objects exactly as the operator wrote them.
 */
export const DEFAULTS = {
  unit: { enable: true, mask: false, command: 'start', onChange: 'restart' },
  file: { permissions: '0644', owner: 'root:root' },
  cri: { name: 'containerd', cgroupDriver: 'systemd' },
} as const;
