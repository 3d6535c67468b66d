/**
 * Facts about the operating systems oscar renders for, said once: the schema's CEL rule, the
 * OSC's deep validation and the resolved config's check all read them from here.
 */

/** OS types with no package manager: spec.packages cannot be installed there. */
export const WITHOUT_PACKAGE_MANAGER: readonly string[] = ['flatcar'];

export function hasPackageManager(type: string): boolean {
  return !WITHOUT_PACKAGE_MANAGER.includes(type);
}

/** Why spec.packages is refused for such a type, and what to do instead. */
export function noPackageManager(type: string): string {
  return `${type} has no package manager: remove spec.packages (ship binaries as files or use a systemd-sysext image)`;
}

/** The same rule in CEL, for the CRD (a type without a package manager has no packages). */
export const PACKAGES_CEL_RULE = `${WITHOUT_PACKAGE_MANAGER.map((t) => `self.type != '${t}'`).join(' && ')} || !has(self.packages) || size(self.packages) == 0`;
