// CMosquitto: the C API of libmosquitto, as Debian 12 ships it (libmosquitto-dev 2.0.11).
#pragma once
#include <mosquitto.h>
// MQTT 5 property identifiers and reason codes (MQTT_PROP_*, MQTT_RC_*).
#include <mqtt_protocol.h>
