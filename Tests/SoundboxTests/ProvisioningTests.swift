// A provisioning folder's checks (Soundbox.Provisioning), pure: the
// image's provision script runs them through `soundboxctl provision check`
// (ProvisionTests runs that script on the host).
import Testing
import Soundbox

@Suite struct ProvisioningTests {
    static let key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFqLM5u/Q0FVJJ3FHqT3aCu7BsNG38jBNcP+Owc93Wsb tech@shop"

    /// The refusal `body` throws, as the technician reads it.
    func problem(_ body: () throws -> Void) -> String? {
        do { try body(); return nil } catch { return (error as? Provisioning.Problem)?.description ?? "not a Problem: \(error)" }
    }

    @Test func sshKeysAreKeyBlobsOfTheirType() {
        #expect(problem { try Provisioning.checkAuthorizedKeys("# techs\n\n" + Self.key + "\n") } == nil)
        #expect(problem { try Provisioning.checkAuthorizedKeys(#"from="10.0.0.0/8",no-pty "# + Self.key) } == nil, "options before the key")
        #expect(problem { try Provisioning.checkAuthorizedKeys(Self.key.replacing("ssh-ed25519 ", with: "ssh-rsa ", maxReplacements: 1)) }
                == "soundbox/authorized_keys:1: not an SSH public key (expected 'ssh-ed25519 AAAA... comment')", "the blob names another type")
        #expect(problem { try Provisioning.checkAuthorizedKeys("# a\nssh-ed25519 AAAAnotakey tech\n") }?.hasPrefix("soundbox/authorized_keys:2:") == true)
        #expect(problem { try Provisioning.checkAuthorizedKeys("ssh-ed25519\n") } != nil, "no blob")
        #expect(problem { try Provisioning.checkAuthorizedKeys("ssh-ed25519 AAAA\n") } != nil, "a blob too short to name its type")
        #expect(problem { try Provisioning.checkAuthorizedKeys("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5\n") } != nil, "not canonical base64")
        #expect(problem { try Provisioning.checkAuthorizedKeys("# only a comment\n  \n") } == "soundbox/authorized_keys: no key in it")
    }

    @Test func pemBlocksOfTheKindsAsked() {
        let cert = "-----BEGIN CERTIFICATE-----\nMIIBAAAA\n-----END CERTIFICATE-----\n"
        #expect(problem { try Provisioning.checkPEM("ca.crt", cert + "\n" + cert, kinds: ["CERTIFICATE"]) } == nil, "a chain")
        #expect(problem { try Provisioning.checkPEM("device.key", cert, kinds: ["PRIVATE KEY", "EC PRIVATE KEY"]) }
                == "soundbox/device.key:1: a 'CERTIFICATE' block; expected PRIVATE KEY or EC PRIVATE KEY")
        #expect(problem { try Provisioning.checkPEM("ca.crt", "-----END CERTIFICATE-----\n", kinds: ["CERTIFICATE"]) }
                == "soundbox/ca.crt:1: not PEM: expected '-----BEGIN CERTIFICATE-----'", "an END without a BEGIN")
        #expect(problem { try Provisioning.checkPEM("ca.crt", "-----BEGIN -----\n", kinds: ["CERTIFICATE"]) }?.hasPrefix("soundbox/ca.crt:1: not PEM") == true)
        #expect(problem { try Provisioning.checkPEM("ca.crt", "-----BEGIN CERTIFICATE-----\n" + String(repeating: "A", count: 77) + "\n", kinds: ["CERTIFICATE"]) }
                == "soundbox/ca.crt:2: not base64 inside the 'CERTIFICATE' block", "a line longer than PEM's 76")
        #expect(problem { try Provisioning.checkPEM("ca.crt", "-----BEGIN CERTIFICATE-----\nMIIB\n\n-----END CERTIFICATE-----", kinds: ["CERTIFICATE"]) }
                == "soundbox/ca.crt:3: not base64 inside the 'CERTIFICATE' block", "a blank line inside")
    }

    @Test func wifiNetworks() throws {
        let open = try Provisioning.wifi("ssid=Café 1\ncountry=IN")
        #expect(open == Provisioning.Wifi(ssid: "Café 1", psk: nil, country: "IN"), "an open network, the last line without a newline")
        let conf = Provisioning.wpaSupplicant(open, derivedKey: nil)
        #expect(conf.contains("    ssid=436166c3a92031\n") && conf.contains("    key_mgmt=NONE\n") && conf.contains("country=IN\n"), "\(conf)")
        let hex = String(repeating: "aB", count: 32)
        let wpa = try Provisioning.wifi("# shop\nssid=Shop\npsk=\(hex)\ncountry=IN\n")
        #expect(wpa.pskIsHex && Provisioning.wpaSupplicant(wpa, derivedKey: "ignored").contains("    psk=\(hex)\n"), "a hex key is the key")
        let phrase = try Provisioning.wifi("ssid=Shop\npsk=pass word!\ncountry=IN\n")
        #expect(!phrase.pskIsHex && Provisioning.wpaSupplicant(phrase, derivedKey: "00ff").contains("    psk=00ff\n"), "a passphrase is not kept")
        #expect(problem { _ = try Provisioning.wifi("ssid=Shop\npsk=\(String(repeating: "x", count: 64))\ncountry=IN\n") }
                == "soundbox/wifi.conf:2: psk must be 8-63 printable ASCII characters or 64 hex digits", "64 characters that are not hex")
        #expect(problem { _ = try Provisioning.wifi("ssid=Shop\npsk=pässword1\ncountry=IN\n") }?.hasPrefix("soundbox/wifi.conf:2: psk") == true, "not ASCII")
        #expect(problem { _ = try Provisioning.wifi("ssid Shop\n") } == "soundbox/wifi.conf:1: expected key=value (keys: ssid, psk, country)")
        #expect(problem { _ = try Provisioning.wifi("ssid=\(String(repeating: "é", count: 17))\ncountry=IN\n") }
                == "soundbox/wifi.conf:1: ssid must be 1-32 bytes", "17 characters, 34 bytes")
        #expect(problem { _ = try Provisioning.wifi("ssid=Shop\n") } == "soundbox/wifi.conf: needs ssid= and country= (psk= too unless the network is open)")
    }

    @Test func hostnames() {
        #expect(problem { _ = try Provisioning.hostname("shop-1\n") } == nil)
        #expect(problem { _ = try Provisioning.hostname("shop-1\nshop-2") } != nil, "a second line, even without its newline")
        for bad in ["", "-shop", "shop-", "Shop", "shop_1", "shop.local", String(repeating: "a", count: 64)] {
            #expect(!Provisioning.isHostname(bad), "\(bad)")
        }
        #expect(Provisioning.isHostname(String(repeating: "a", count: 63)) && Provisioning.isHostname("1"))
    }

    @Test func signaturesRequiredByTheSettings() {
        #expect(Provisioning.signingRequiredLine("device.id = a\n  payment.signing = required # keys below\n") == 2)
        #expect(Provisioning.signingRequiredLine("payment.signing = off\n") == nil)
        #expect(Provisioning.signingRequiredLine("# payment.signing = required\n") == nil, "a comment")
    }

    @Test func windowsFilesReadAsWritten() {
        #expect(Provisioning.normalized([0xEF, 0xBB, 0xBF] + Array("a\r\nb\r\n".utf8)) == Array("a\nb\n".utf8))
        #expect(problem { try Provisioning.checkText("hostname", [65, 0, 10]) } == "soundbox/hostname: contains NUL bytes; not a text file")
    }
}
