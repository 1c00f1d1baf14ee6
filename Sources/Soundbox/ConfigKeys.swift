// The catalogue: every key of soundbox.conf, typed, with its default,
// range, scope and help (docs/config.md holds its table, from `soundboxctl config keys`).

/// A key whose value is text (`config[.voiceLang]` is a `String`).
public struct TextKey: Sendable, Hashable {
    public let key: ConfigKey
    init(_ name: String, _ defaultValue: String, _ scope: ConfigKey.Scope, kind: ConfigKey.Kind = .text,
         secret: Bool = false, help: String) {
        key = ConfigKey(name: name, defaultValue: defaultValue, kind: kind, scope: scope, secret: secret, help: help)
    }
}

/// A key whose value is an integer in a range.
public struct IntKey: Sendable, Hashable {
    public let key: ConfigKey
    init(_ name: String, _ defaultValue: Int, _ range: ClosedRange<Int>, orOff: Bool = false, _ scope: ConfigKey.Scope, help: String) {
        key = ConfigKey(name: name, defaultValue: "\(defaultValue)", kind: orOff ? .integerOrOff(range) : .integer(range), scope: scope, help: help)
    }
}

/// A key whose value is `true` or `false`.
public struct BoolKey: Sendable, Hashable {
    public let key: ConfigKey
    init(_ name: String, _ defaultValue: Bool, _ scope: ConfigKey.Scope, help: String) {
        key = ConfigKey(name: name, defaultValue: "\(defaultValue)", kind: .bool, scope: scope, help: help)
    }
}

/// A key whose value is an exact amount of money.
public struct AmountKey: Sendable, Hashable {
    public let key: ConfigKey
    init(_ name: String, _ defaultValue: String, _ scope: ConfigKey.Scope, help: String) {
        key = ConfigKey(name: name, defaultValue: defaultValue, kind: .amount, scope: scope, help: help)
    }
}

extension TextKey {
    public static let updateHelper = TextKey("update.helper", "/usr/lib/soundbox-image/update", .file, kind: .path,
                                             help: "the image's update helper (image/README.md, Updates); missing: updates are refused")
    public static let stateDir = TextKey("state.dir", "/var/lib/soundbox", .file, kind: .path, help: "folder of the database soundbox.db")
    public static let controlSocket = TextKey("control.socket", "/run/soundbox/control.sock", .file, kind: .path, help: "Unix socket for soundboxctl")
    public static let controlGroup = TextKey("control.group", "soundbox", .file,
                                             help: "group owning the control socket (mode 0660); ignored if it does not exist")
    public static let voiceDir = TextKey("voice.dir", "/usr/share/soundbox/voices", .file, kind: .path,
                                         help: "folder holding one folder per voice pack; unset: beside the program (../share/soundbox/voices, or the source checkout's voices/) if there, else this default")
    public static let voiceLang = TextKey("voice.lang", "zh-CN", .remote, kind: .packName,
                                          help: "voice pack used when a payment names none; must be installed in voice.dir")
    public static let audioOutput = TextKey("audio.output", "alsa", .file, kind: .choice(["alsa", "wav", "null"]),
                                            help: "alsa: the sound card; wav: append to audio.wav_file; null: no sound")
    public static let audioDevice = TextKey("audio.device", "default", .file,
                                            help: "ALSA PCM name, e.g. default, hw:0,0, plughw:1, file:'/tmp/o.raw',raw")
    public static let audioWavFile = TextKey("audio.wav_file", "soundbox.wav", .file, kind: .path,
                                             help: "with audio.output = wav, announcements are appended to this WAV file (relative: in state.dir); never written through a symbolic link, nor a FIFO, device or hard-linked file; an existing file must be a WAV of the same format")
    public static let deviceID = TextKey("device.id", "", .file, kind: .topicLevel, help: "MQTT client id and topic segment; empty = the hostname")
    public static let mqttHost = TextKey("mqtt.host", "localhost", .file, kind: .host, help: "broker host name (checked against its TLS certificate)")
    public static let mqttPrefix = TextKey("mqtt.prefix", "soundbox/v1", .file, kind: .topicPrefix, help: "topic prefix: PREFIX/DEVICE/payment ...")
    public static let mqttTLSCA = TextKey("mqtt.tls.ca", "", .file, kind: .optionalPath,
                                          help: "CA file; set = TLS 1.2+ with hostname verification (there is no insecure mode)")
    public static let mqttTLSCert = TextKey("mqtt.tls.cert", "", .file, kind: .optionalPath, help: "client certificate file (with mqtt.tls.key)")
    public static let mqttTLSKey = TextKey("mqtt.tls.key", "", .file, kind: .optionalPath, help: "client private key file")
    public static let mqttUsername = TextKey("mqtt.username", "", .file, kind: .optionalText, help: "broker user name, optional")
    public static let mqttPassword = TextKey("mqtt.password", "", .file, kind: .optionalText, secret: true,
                                             help: "broker password, optional; never shown or logged")
    public static let gpioChip = TextKey("gpio.chip", "gpiochip0", .file,
                                         help: "GPIO chip by name, path, label or number (Raspberry Pi 5 header: pinctrl-rp1)")
    public static let paymentSigning = TextKey("payment.signing", "off", .file, kind: .choice(Signature.Mode.allCases.map(\.rawValue)),
                                               help: "required: payments, cmd and config messages must carry a valid Ed25519 signature by a key in payment.keys (docs/signing.md)")
    public static let paymentKeys = TextKey("payment.keys", "/etc/soundbox/keys", .file, kind: .path,
                                            help: "folder of the backend's Ed25519 public keys (*.pem, *.pub); re-read on SIGHUP")
    public static let logLevel = TextKey("log.level", "info", .local, kind: .choice(["info", "debug"]), help: "debug adds amounts and per-clip detail")
}

extension IntKey {
    public static let updateRebootDeadline = IntKey("update.reboot_deadline_s", 1800, 0...86400, .local,
                                                    help: "after an update is installed, how long the reboot waits for an empty queue before it takes the next pause between payments")
    public static let audioVolume = IntKey("audio.volume", 6, 0...10, .remote, help: "volume 0-10, 2.5 dB a step (10 = full scale)")
    public static let audioMinVolume = IntKey("audio.min_volume", 0, 0...10, .remote,
                                              help: "payments are never spoken quieter than this, whatever audio.volume (which it does not change)")
    public static let queueStaleAfter = IntKey("queue.stale_after_s", 600, 0...604_800, .remote,
                                               help: "a payment older than this when its turn comes is expired, not spoken, if the clock is synchronised (0 = never)")
    public static let queueRetentionDays = IntKey("queue.retention_days", 7, 1...365, .remote, help: "duplicate window and age of history kept")
    public static let queueHistoryMax = IntKey("queue.history_max", 10000, 100...1_000_000, .remote, help: "finished payments kept at most")
    public static let voiceTargetLUFS = IntKey("voice.target_lufs", -16, -40 ... -5, .file,
                                               help: "soundboxctl voice build: the loudness (LUFS, ITU-R BS.1770) every clip is brought to")
    public static let voiceTruePeak = IntKey("voice.true_peak_dbtp", -1, -12...0, .file,
                                             help: "soundboxctl voice build: no clip's true peak above this (dBTP)")
    public static let queueSummaryMin = IntKey("queue.summary_min", 3, 0...100_000, .remote,
                                               help: "at start and after a reconnect, this many waiting payments older than queue.summary_after_s are spoken as one offline summary, not one by one (0 = never)")
    public static let queueSummaryAfter = IntKey("queue.summary_after_s", 60, 0...604_800, .remote,
                                                 help: "how old (by its ts, else its acceptance) a waiting payment must be to go into the offline summary")
    public static let mqttPort = IntKey("mqtt.port", 0, 0...65535, .file, help: "broker port; 0 = 1883, or 8883 with TLS")
    public static let mqttKeepalive = IntKey("mqtt.keepalive", 60, 5...3600, .file,
                                             help: "seconds between MQTT keep-alive pings on an idle link; the broker publishes the box's will (offline) after 1.5 times this without a word from it")
    public static let mqttDeadLink = IntKey("mqtt.dead_link_s", 10, 5...3600, orOff: true, .file,
                                            help: "a connection from which nothing has come back for this long is known dead and replaced: TCP keep-alive probes after 2 s less of silence, then every second, and TCP_USER_TIMEOUT; on an idle TLS link ~1.3 MB a day at 10, ~0.7 MB at 20 (docs/mqtt.md); 0 = only the MQTT keep-alive notices (within twice mqtt.keepalive)")
    public static let mqttReconnectMax = IntKey("mqtt.reconnect_max_s", 60, 2...3600, .file,
                                                help: "longest wait after a broker refused (exponential from 1-2 s, with jitter), also after a takeover; with no route or no answer the box retries within 0.5-2.5 s (docs/mqtt.md); a link lost within this + 30 s of coming up counts towards a takeover")
    public static let gpioDebounce = IntKey("gpio.debounce_ms", 30, 1...500, .file, help: "software debounce of the buttons and the switch")
}

extension BoolKey {
    public static let audioNullRealtime = BoolKey("audio.null_realtime", true, .local,
                                                  help: "with audio.output = null: take as long as the sound would (false: instant, for tests)")
    public static let audioMute = BoolKey("audio.mute", false, .remote, help: "true: payments are recorded as muted, not spoken")
    public static let mqttEnabled = BoolKey("mqtt.enabled", true, .file,
                                            help: "false: no broker connection (payments only through soundboxctl say)")
    public static let mqttLinkPrompts = BoolKey("mqtt.link_prompts", true, .remote,
                                                help: "speak 网络已断开 when the broker link has been down 10 s (at most once a minute; never while a takeover is suspected), 网络已连接 when it comes back after that")
    public static let gpioEnabled = BoolKey("gpio.enabled", true, .file, help: "false: no mute switch, buttons or LED")
}

extension AmountKey {
    public static let paymentMaxAmount = AmountKey("payment.max_amount", "99999999.99", .local, help: "larger payments are rejected")
}

/// Per GPIO function (mute, vol_up, vol_down, led): line offset (-1 = not
/// fitted), active-low, bias. Defaults: a Raspberry Pi 4/5 header, BCM
/// numbering, buttons and switch to ground with pull-ups (board/).
public struct GPIOKeys: Sendable {
    public let function: String
    public let line: IntKey
    public let activeLow: BoolKey
    public let bias: TextKey

    init(_ fn: String, line: Int, activeLow: Bool, bias: String) {
        function = fn
        let what = fn == "led" ? "output" : "input"
        self.line = IntKey("gpio.\(fn).line", line, -1...1023, .file, help: "line offset of the \(fn) \(what) on gpio.chip; -1 = not fitted")
        self.activeLow = BoolKey("gpio.\(fn).active_low", activeLow, .file, help: "true: the \(fn) is active when the line is low")
        self.bias = TextKey("gpio.\(fn).bias", bias, .file, kind: .choice(["as-is", "disable", "pull-up", "pull-down"]), help: "bias of the \(fn) line")
    }

    public static let mute = GPIOKeys("mute", line: 17, activeLow: true, bias: "pull-up")
    public static let volumeUp = GPIOKeys("vol_up", line: 27, activeLow: true, bias: "pull-up")
    public static let volumeDown = GPIOKeys("vol_down", line: 22, activeLow: true, bias: "pull-up")
    public static let led = GPIOKeys("led", line: 23, activeLow: false, bias: "as-is")
    public static let all = [mute, volumeUp, volumeDown, led]
}
