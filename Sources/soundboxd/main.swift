import Soundbox
print("soundboxd \(soundboxVersion)")
