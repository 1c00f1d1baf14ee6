// SPDX-License-Identifier: GPL-2.0
/*
 * soundbox-tryboot: hands `reboot "0 tryboot"` to the Raspberry Pi firmware.
 *
 * The Pi 4 firmware boots the [tryboot] partition of autoboot.txt once when
 * its one-shot tryboot flag is set; Raspberry Pi's own kernel sets the flag
 * from the reboot command, Debian's does not (its firmware driver has no
 * reboot notifier). This module adds one: on a restart whose command holds
 * "tryboot" it sends the firmware's SET_REBOOT_FLAGS property (tag
 * 0x00038064, value 1) over the mailbox, through the firmware driver's own
 * exported interface. Without a Raspberry Pi firmware (another board,
 * QEMU) it loads and does nothing, so one image boots everywhere.
 */
#include <linux/module.h>
#include <linux/of.h>
#include <linux/reboot.h>
#include <linux/string.h>
#include <soc/bcm2835/raspberrypi-firmware.h>

#define SOUNDBOX_SET_REBOOT_FLAGS 0x00038064
#define SOUNDBOX_TRYBOOT_FLAG 0x1

static struct rpi_firmware *firmware;

static int soundbox_tryboot_notify(struct notifier_block *nb, unsigned long action, void *data)
{
	u32 flags = SOUNDBOX_TRYBOOT_FLAG;
	const char *cmd = data;

	if (action != SYS_RESTART || !cmd || !strstr(cmd, "tryboot"))
		return NOTIFY_DONE;
	if (rpi_firmware_property(firmware, SOUNDBOX_SET_REBOOT_FLAGS, &flags, sizeof(flags)))
		pr_err("soundbox-tryboot: the firmware refused the tryboot flag\n");
	else
		pr_info("soundbox-tryboot: tryboot flag set for this restart\n");
	return NOTIFY_DONE;
}

static struct notifier_block soundbox_tryboot_nb = {
	.notifier_call = soundbox_tryboot_notify,
};

static int __init soundbox_tryboot_init(void)
{
	struct device_node *np = rpi_firmware_find_node();

	if (!np) {
		pr_info("soundbox-tryboot: no Raspberry Pi firmware here; nothing to do\n");
		return 0;
	}
	firmware = rpi_firmware_get(np);
	of_node_put(np);
	if (!firmware) {
		pr_info("soundbox-tryboot: the Raspberry Pi firmware is not ready; nothing to do\n");
		return 0;
	}
	pr_info("soundbox-tryboot: reboot \"0 tryboot\" will set the firmware's tryboot flag\n");
	return register_reboot_notifier(&soundbox_tryboot_nb);
}

static void __exit soundbox_tryboot_exit(void)
{
	if (!firmware)
		return;
	unregister_reboot_notifier(&soundbox_tryboot_nb);
	rpi_firmware_put(firmware);
}

module_init(soundbox_tryboot_init);
module_exit(soundbox_tryboot_exit);
MODULE_DESCRIPTION("Passes reboot \"0 tryboot\" to the Raspberry Pi firmware");
MODULE_LICENSE("GPL");
